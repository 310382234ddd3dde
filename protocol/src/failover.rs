//! The failover policy of the membership leader (docs/design.md, "Failover" and "Rebuild"), as
//! a pure state machine: what to ask the voters about, when a majority confirms a removal, and
//! what to probe and propose to restore and rebuild. Raft, the status requests and the clock
//! are the driver's (`coordinator/src/membership_task.rs`): it feeds [`Failover`] the leader's
//! ticks with what the node knows ([`LeaderView`]), the voters' answers and the probes'
//! findings, and carries out the [`FailoverAction`]s it returns. Times are passed in (µs).
//!
//! Removing a dead DC: the leader's failure detector suspects every node of a DC; the leader
//! asks every other voter whether its own detector does too, and once a majority of the
//! voters (itself included) suspect the DC it proposes [`Command::RemoveDc`] ([`confirmed`]).
//! A dead node whose DC is otherwise alive is confirmed the same way and removed alone
//! ([`Command::RemoveNode`]). A removal the membership would refuse (a second replica of a
//! partition lost before the first is rebuilt) is not asked about: the suspect stays placed
//! and is waited for ([`FailoverAction::Deferred`], once per suspect).
//!
//! Rebuilding: every [`REBUILD_EVERY_US`] µs the leader probes the nodes of removed DCs and
//! removed nodes (restored once one answers: [`Command::RestoreDc`],
//! [`Command::RestoreNode`]) and the learners' nodes (promoted once their copy is complete:
//! [`Command::Promote`]), and proposes
//! every learner the partitions are short of ([`Membership::plan_rebuild`]) on nodes its
//! detector does not suspect.

use redt_membership::{Command, Membership, Refused, Status};
use redt_proto::{majority, DcId, Epoch, NodeId, PartitionId, Topology};
use std::collections::{BTreeSet, HashMap, HashSet};

/// How long the leader waits before asking the voters about the same suspect again, µs.
pub const CONFIRM_EVERY_US: u64 = 200_000;

/// How often the leader probes removed DCs and nodes and the learners, and plans the rebuild,
/// µs.
pub const REBUILD_EVERY_US: u64 = 500_000;

/// What the leader asks the voters about: a whole DC, or one node of a DC that is otherwise
/// alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Suspect {
    /// Every node of the DC.
    Dc(DcId),
    /// One node.
    Node(NodeId),
}

impl Suspect {
    /// The membership command that removes it.
    pub fn removal(self) -> Command {
        match self {
            Suspect::Dc(dc) => Command::RemoveDc(dc),
            Suspect::Node(node) => Command::RemoveNode(node),
        }
    }

    /// Whether a voter's status `s` says it suspects this.
    pub fn suspected_in(self, s: &redt_proto::wire::StatusReply) -> bool {
        match self {
            Suspect::Dc(dc) => s.suspected_dcs.contains(&u32::from(dc.0)),
            Suspect::Node(node) => s.suspected_nodes.contains(&u32::from(node.0)),
        }
    }

    /// The suspect as `topology` names it: a DC's or a node's name.
    pub fn named(self, topology: &Topology) -> String {
        match self {
            Suspect::Dc(dc) => topology.dc_name(dc),
            Suspect::Node(node) => topology.node_name(node),
        }
    }
}

impl std::fmt::Display for Suspect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Suspect::Dc(dc) => write!(f, "{dc}"),
            Suspect::Node(node) => write!(f, "{node}"),
        }
    }
}

/// The confirmation rule: `suspect` (a DC, or a node) is to be removed when it is still up in
/// `membership` and a majority of the `voters` suspect it — `suspecting` is the set of voters
/// whose failure detector suspects it (every node of the DC, or the node; the leader's own
/// view included).
pub fn confirmed(membership: &Membership, voters: &[NodeId], suspect: Suspect, suspecting: &BTreeSet<NodeId>) -> bool {
    let up = match suspect {
        Suspect::Dc(dc) => membership.dc_status(dc) == Some(Status::Up),
        Suspect::Node(node) => membership.node_status(node) == Some(Status::Up),
    };
    up && voters.iter().filter(|v| suspecting.contains(v)).count() >= majority(voters.len())
}

/// What the leader knows at one step.
#[derive(Clone, Copy, Debug)]
pub struct LeaderView<'a> {
    /// The leader's node.
    pub me: NodeId,
    /// The topology file's nodes and DCs (a node's DC).
    pub topology: &'a Topology,
    /// The membership as the leader's Raft peer applied it.
    pub membership: &'a Membership,
    /// The Raft group's current voters (a removed DC's voter no longer counts).
    pub voters: &'a [NodeId],
    /// The DCs the leader's failure detector suspects.
    pub suspected_dcs: &'a [DcId],
    /// The nodes it suspects.
    pub suspected_nodes: &'a [NodeId],
}

/// What the driver asks a node's status for, and what it proposes when the node answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Restore the removed DC once any of its `nodes` answers.
    RestoreDc {
        /// The DC.
        dc: DcId,
        /// Its nodes, asked in order.
        nodes: Vec<NodeId>,
    },
    /// Restore the node, removed on its own, once it answers.
    RestoreNode(NodeId),
    /// Promote the learner once its node's status reports the copy of `partition` it began in
    /// `added_in` filled.
    Promote {
        /// The partition.
        partition: PartitionId,
        /// The learner's node.
        node: NodeId,
        /// The epoch the learner was added in.
        added_in: Epoch,
    },
}

impl Probe {
    /// The command to propose when the probe finds what it looks for.
    pub fn command(&self) -> Command {
        match self {
            Probe::RestoreDc { dc, .. } => Command::RestoreDc(*dc),
            Probe::RestoreNode(node) => Command::RestoreNode(*node),
            Probe::Promote { partition, node, added_in } => {
                Command::Promote { partition: *partition, node: *node, added_in: *added_in }
            }
        }
    }
}

/// What the driver is to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailoverAction {
    /// Ask each of `voters` whether its detector suspects `suspect` and hand each answer to
    /// [`Failover::answer`] with `round` (a voter that does not answer in time: `false`).
    AskVoters {
        /// The confirmation round.
        round: u64,
        /// What is asked about.
        suspect: Suspect,
        /// The voters to ask (the leader itself is counted without asking).
        voters: Vec<NodeId>,
    },
    /// A majority confirmed `suspect`: propose its removal, and drop the round's answers still
    /// to come.
    Remove(Suspect),
    /// A removal the membership would refuse now: the suspect stays placed. Returned once per
    /// suspect until it is removable again.
    Deferred {
        /// The suspect.
        suspect: Suspect,
        /// Why the membership would refuse its removal.
        why: Refused,
    },
    /// Run these probes and hand each one's finding to [`Failover::probed`].
    Probe(Vec<Probe>),
    /// Propose a command (a learner the partitions are short of, or what a probe found).
    Propose(Command),
}

mutations! {
    /// Deliberate bugs in the policy, for tests that check the simulation catches them
    /// (`redt sim --mutant-confirm-alone`). Off by default. Has its fields only in a build with
    /// the `mutants` feature (the tests turn it on); without it, none, and every switch reads as
    /// off.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct FailoverMutations {
        /// The leader removes what its own detector suspects without asking the voters (no
        /// majority): a DC cut off from the leader alone is removed though the others reach it.
        pub confirm_alone: bool,
    }
}

/// The confirmation under way.
#[derive(Clone, Debug)]
struct Asking {
    round: u64,
    suspect: Suspect,
    /// Voters that said they suspect it (the leader itself from the start).
    suspecting: BTreeSet<NodeId>,
    /// Answers of this round still to come.
    pending: usize,
}

/// The membership leader's failover policy (see the module docs). Every node keeps one; only
/// a leader's ticks do anything.
#[derive(Clone, Debug)]
pub struct Failover {
    round: u64,
    asking: Option<Asking>,
    /// When each suspect was last asked about, µs.
    asked_at: HashMap<Suspect, u64>,
    /// Suspects whose removal was deferred (said once each).
    deferred: HashSet<Suspect>,
    /// When the last rebuild step ran (at first, when the policy started), µs.
    rebuilt_at: u64,
    /// Probes of the last rebuild step not yet back.
    probes_pending: usize,
    mutations: FailoverMutations,
}

impl Failover {
    /// A policy started at `now_us` that has asked and probed nothing: its first rebuild step
    /// comes [`REBUILD_EVERY_US`] later.
    pub fn new(now_us: u64) -> Failover {
        Failover {
            round: 0,
            asking: None,
            asked_at: HashMap::new(),
            deferred: HashSet::new(),
            rebuilt_at: now_us,
            probes_pending: 0,
            mutations: FailoverMutations::default(),
        }
    }

    /// The policy with deliberate bugs switched on (tests only).
    pub fn with_mutations(mut self, mutations: FailoverMutations) -> Failover {
        self.mutations = mutations;
        self
    }

    /// One Raft tick at `now_us`; `leader`: whether this node leads the Raft group now. A
    /// leader with no confirmation under way asks the voters about its next suspect (a DC its
    /// detector suspects, still up, not its own; else a node it suspects whose DC it does not
    /// suspect as a whole, still up, holding a replica), not asked within
    /// [`CONFIRM_EVERY_US`]; and every [`REBUILD_EVERY_US`], once the last step's probes are
    /// back, probes removed DCs, removed nodes and learners and proposes the learners the
    /// partitions are short of.
    pub fn tick(&mut self, now_us: u64, leader: bool, view: &LeaderView) -> Vec<FailoverAction> {
        let mut actions = Vec::new();
        if !leader {
            return actions;
        }
        if self.asking.is_none() {
            if let Some(suspect) = self.next_suspect(now_us, view, &mut actions) {
                self.asked_at.insert(suspect, now_us);
                self.round += 1;
                let voters: Vec<NodeId> = view.voters.iter().copied().filter(|&v| v != view.me).collect();
                let asking =
                    Asking { round: self.round, suspect, suspecting: BTreeSet::from([view.me]), pending: voters.len() };
                // Confirmed by the leader alone (a group of one voter): no one to ask.
                let alone = mutant!(self.mutations.confirm_alone);
                if alone || confirmed(view.membership, view.voters, suspect, &asking.suspecting) {
                    actions.push(FailoverAction::Remove(suspect));
                } else if !voters.is_empty() {
                    self.asking = Some(asking);
                    actions.push(FailoverAction::AskVoters { round: self.round, suspect, voters });
                }
            }
        }
        if self.probes_pending == 0 && now_us.saturating_sub(self.rebuilt_at) >= REBUILD_EVERY_US {
            self.rebuilt_at = now_us;
            let probes = rebuild_probes(view);
            self.probes_pending = probes.len();
            if !probes.is_empty() {
                actions.push(FailoverAction::Probe(probes));
            }
            let planned = view.membership.plan_rebuild().into_iter().flat_map(|s| s.proposals);
            actions.extend(
                planned
                    .filter(|c| !matches!(c, Command::AddLearner { node, .. } if view.suspected_nodes.contains(node)))
                    .map(FailoverAction::Propose),
            );
        }
        actions
    }

    /// Voter `voter`'s answer in confirmation round `round`: whether it suspects the round's
    /// suspect. With `membership` and `voters` as the leader's peer has them now. Answers of
    /// another round are ignored.
    pub fn answer(
        &mut self,
        round: u64,
        voter: NodeId,
        suspects: bool,
        membership: &Membership,
        voters: &[NodeId],
    ) -> Vec<FailoverAction> {
        let Some(asking) = self.asking.as_mut().filter(|a| a.round == round) else {
            return Vec::new();
        };
        asking.pending = asking.pending.saturating_sub(1);
        if suspects {
            asking.suspecting.insert(voter);
        }
        if confirmed(membership, voters, asking.suspect, &asking.suspecting) {
            let suspect = asking.suspect;
            self.asking = None;
            return vec![FailoverAction::Remove(suspect)];
        }
        if asking.pending == 0 {
            self.asking = None;
        }
        Vec::new()
    }

    /// What one probe of the last rebuild step found: `found`, the command to propose (`None`:
    /// the node did not answer, or its copy is not complete). Proposed only while `leader`.
    pub fn probed(&mut self, found: Option<Command>, leader: bool) -> Vec<FailoverAction> {
        self.probes_pending = self.probes_pending.saturating_sub(1);
        match found {
            Some(command) if leader => vec![FailoverAction::Propose(command)],
            _ => Vec::new(),
        }
    }

    /// The suspect a confirmation round is under way for, if any.
    pub fn asking(&self) -> Option<Suspect> {
        self.asking.as_ref().map(|a| a.suspect)
    }

    /// See [`Failover::tick`]; a removal the membership would refuse is skipped and said once
    /// in `actions`.
    fn next_suspect(&mut self, now_us: u64, view: &LeaderView, actions: &mut Vec<FailoverAction>) -> Option<Suspect> {
        let my_dc = view.topology.nodes.get(view.me.0 as usize).map(|x| x.dc)?;
        let membership = view.membership;
        let due = |s: &Suspect| self.asked_at.get(s).is_none_or(|&t| now_us.saturating_sub(t) >= CONFIRM_EVERY_US);
        let dcs = view
            .suspected_dcs
            .iter()
            .copied()
            .filter(|&d| d != my_dc && membership.dc_status(d) == Some(Status::Up))
            .map(Suspect::Dc);
        let nodes = view
            .suspected_nodes
            .iter()
            .copied()
            .filter(|&x| x != view.me && membership.node_status(x) == Some(Status::Up))
            .filter(|x| view.topology.nodes.get(x.0 as usize).is_some_and(|t| !view.suspected_dcs.contains(&t.dc)))
            .filter(|&x| membership.partitions().any(|(_, r)| r.nodes().any(|m| m == x)))
            .map(Suspect::Node);
        let candidates: Vec<Suspect> = dcs.chain(nodes).filter(|s| due(s)).collect();
        for s in candidates {
            match membership.check(&s.removal()) {
                Ok(()) => {
                    self.deferred.remove(&s);
                    return Some(s);
                }
                Err(why) => {
                    if self.deferred.insert(s) {
                        actions.push(FailoverAction::Deferred { suspect: s, why });
                    }
                }
            }
        }
        None
    }
}

/// The probes of one rebuild step: the nodes of each removed DC, each node removed on its own
/// while its DC is up, and each learner's node.
fn rebuild_probes(view: &LeaderView) -> Vec<Probe> {
    let membership = view.membership;
    let mut probes = Vec::new();
    for (dc, status) in membership.dcs() {
        if status == Status::Removed {
            let nodes = view.topology.dcs.get(dc.0 as usize).map(|d| d.nodes.clone()).unwrap_or_default();
            probes.push(Probe::RestoreDc { dc, nodes });
        }
    }
    for (node, dc, status) in membership.nodes() {
        if status == Status::Removed && membership.dc_status(dc) == Some(Status::Up) {
            probes.push(Probe::RestoreNode(node));
        }
    }
    for (partition, replicas) in membership.partitions() {
        for learner in replicas.learners() {
            probes.push(Probe::Promote { partition, node: learner.node, added_in: learner.added_in });
        }
    }
    probes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epochs::{placement_of, removed_dcs};

    /// 4 DCs × 2 nodes, 8 partitions × 3 replicas.
    fn topology() -> Topology {
        Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("default.yaml is valid")
    }

    fn membership(t: &Topology) -> Membership {
        let factor = t.partitions.iter().map(|p| p.replicas.len()).max().unwrap();
        Membership::from_topology(t, factor).unwrap()
    }

    /// The first node of each DC: the Raft voters.
    fn voters(t: &Topology) -> Vec<NodeId> {
        t.dcs.iter().map(|d| d.nodes[0]).collect()
    }

    fn view<'a>(
        t: &'a Topology,
        m: &'a Membership,
        voters: &'a [NodeId],
        dcs: &'a [DcId],
        nodes: &'a [NodeId],
    ) -> LeaderView<'a> {
        LeaderView { me: voters[0], topology: t, membership: m, voters, suspected_dcs: dcs, suspected_nodes: nodes }
    }

    /// The confirmation rounds `actions` start: (round, suspect, voters asked).
    fn asks(actions: &[FailoverAction]) -> Vec<(u64, Suspect, Vec<NodeId>)> {
        actions
            .iter()
            .filter_map(|a| match a {
                FailoverAction::AskVoters { round, suspect, voters } => Some((*round, *suspect, voters.clone())),
                _ => None,
            })
            .collect()
    }

    /// The commands `actions` propose.
    fn proposals(actions: &[FailoverAction]) -> Vec<Command> {
        actions
            .iter()
            .filter_map(|a| match a {
                FailoverAction::Propose(c) => Some(*c),
                _ => None,
            })
            .collect()
    }

    fn nodes_of(t: &Topology, dc: DcId) -> Vec<NodeId> {
        t.dcs[dc.0 as usize].nodes.clone()
    }

    #[test]
    fn a_majority_of_voters_confirms_a_removal_once() {
        let t = topology();
        let mut m = membership(&t);
        let voters = voters(&t);
        let dead = DcId(1);
        let others: Vec<NodeId> = voters.iter().copied().filter(|v| t.nodes[v.0 as usize].dc != dead).collect();
        let some: BTreeSet<NodeId> = others.iter().take(majority(voters.len()) - 1).copied().collect();
        assert!(!confirmed(&m, &voters, Suspect::Dc(dead), &some), "one short of a majority");
        let all: BTreeSet<NodeId> = others.iter().copied().collect();
        assert!(confirmed(&m, &voters, Suspect::Dc(dead), &all));
        m.apply(&Suspect::Dc(dead).removal()).unwrap();
        assert!(!confirmed(&m, &voters, Suspect::Dc(dead), &all), "a removed DC is not removed again");
        let p = placement_of(&t, &m);
        assert_eq!(p.epoch, m.epoch());
        assert_eq!(removed_dcs(&p), vec![dead]);
    }

    #[test]
    fn a_majority_of_voters_confirms_a_node_removal_once() {
        let t = topology();
        let mut m = membership(&t);
        let voters = voters(&t);
        // A node that is not its DC's voter, holding replicas.
        let dead = t.nodes.iter().map(|n| n.id).find(|n| !voters.contains(n)).expect("a second node in some DC");
        let some: BTreeSet<NodeId> = voters.iter().take(majority(voters.len()) - 1).copied().collect();
        assert!(!confirmed(&m, &voters, Suspect::Node(dead), &some), "one short of a majority");
        let all: BTreeSet<NodeId> = voters.iter().copied().collect();
        assert!(confirmed(&m, &voters, Suspect::Node(dead), &all));
        let change = m.apply(&Suspect::Node(dead).removal()).unwrap();
        assert!(change.placement_changed(), "its replicas are dropped in a new epoch");
        assert!(!confirmed(&m, &voters, Suspect::Node(dead), &all), "a removed node is not removed again");
        let p = placement_of(&t, &m);
        assert!(p.partitions.iter().all(|x| !x.replicas.contains(&dead)), "{dead} holds no replica");
        assert!(removed_dcs(&p).is_empty(), "its DC stays");
    }

    #[test]
    fn only_a_leader_asks_and_probes() {
        let t = topology();
        let m = membership(&t);
        let voters = voters(&t);
        let dcs = [DcId(2)];
        let mut f = Failover::new(0);
        assert!(f.tick(10 * REBUILD_EVERY_US, false, &view(&t, &m, &voters, &dcs, &[])).is_empty());
        assert_eq!(f.asking(), None);
    }

    /// Every way the three other voters can answer a round about a suspected DC — each
    /// suspects it, does not, or is not heard from — in every order: the leader proposes the
    /// removal exactly when it and the voters that suspect it make a majority of the four, at
    /// the answer that makes it, once; answers of an older round change nothing.
    #[test]
    fn every_answer_pattern_of_a_round_removes_exactly_on_a_majority() {
        let t = topology();
        let m = membership(&t);
        let voters = voters(&t);
        let dead = DcId(3);
        let dcs = [dead];
        let others: Vec<NodeId> = voters[1..].to_vec();
        // 0: suspects, 1: does not, 2: no answer.
        for pattern in 0..27u32 {
            let says: Vec<u32> = (0..3).map(|i| pattern / 3u32.pow(i) % 3).collect();
            let heard: Vec<(NodeId, bool)> =
                others.iter().zip(&says).filter(|(_, &s)| s != 2).map(|(&v, &s)| (v, s == 0)).collect();
            for order in permutations(heard.len()) {
                let mut f = Failover::new(0);
                let actions = f.tick(1, true, &view(&t, &m, &voters, &dcs, &[]));
                let (round, suspect, asked) = asks(&actions).pop().expect("the leader asks the voters");
                assert_eq!((suspect, asked.clone()), (Suspect::Dc(dead), others.clone()));
                // A stale answer of another round is ignored.
                assert!(f.answer(round + 7, others[0], true, &m, &voters).is_empty());
                let mut suspecting = 1;
                let mut removed = 0;
                for &i in &order {
                    let (v, s) = heard[i];
                    suspecting += usize::from(s);
                    let out = f.answer(round, v, s, &m, &voters);
                    let now = out.iter().filter(|a| **a == FailoverAction::Remove(Suspect::Dc(dead))).count();
                    if now > 0 {
                        assert!(suspecting >= majority(voters.len()), "removed with {suspecting} of {}", voters.len());
                    }
                    removed += now;
                }
                let want = usize::from(1 + heard.iter().filter(|h| h.1).count() >= majority(voters.len()));
                assert_eq!(removed, want, "pattern {says:?}, order {order:?}");
                let all_heard = heard.len() == others.len();
                assert_eq!(f.asking().is_none(), removed == 1 || all_heard, "pattern {says:?}");
            }
        }
    }

    /// The index orders of `n` items.
    fn permutations(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![vec![]];
        }
        let mut out = Vec::new();
        for p in permutations(n - 1) {
            for at in 0..=p.len() {
                let mut q = p.clone();
                q.insert(at, n - 1);
                out.push(q);
            }
        }
        out
    }

    #[test]
    fn a_suspect_is_asked_about_again_only_after_the_wait() {
        let t = topology();
        let m = membership(&t);
        let voters = voters(&t);
        let dcs = [DcId(1)];
        let mut f = Failover::new(0);
        let ask =
            |f: &mut Failover, now| asks(&f.tick(now, true, &view(&t, &m, &voters, &dcs, &[]))).first().map(|a| a.0);
        let first = ask(&mut f, 1_000).expect("asked");
        assert_eq!(ask(&mut f, 2_000), None, "a round is under way");
        for v in &voters[1..] {
            assert!(f.answer(first, *v, false, &m, &voters).is_empty());
        }
        assert_eq!(f.asking(), None, "every voter answered: the round is over");
        assert_eq!(ask(&mut f, 1_000 + CONFIRM_EVERY_US - 1), None, "asked too recently");
        assert_eq!(ask(&mut f, 1_000 + CONFIRM_EVERY_US), Some(first + 1));
    }

    #[test]
    fn its_own_dc_and_a_node_of_a_suspected_dc_are_never_asked_about_alone() {
        let t = topology();
        let m = membership(&t);
        let voters = voters(&t);
        let my_dc = t.nodes[voters[0].0 as usize].dc;
        let mut f = Failover::new(0);
        // Its own DC, suspected by a confused detector: nothing.
        let actions = f.tick(1, true, &view(&t, &m, &voters, &[my_dc], &[]));
        assert!(asks(&actions).is_empty(), "{actions:?}");
        // A node of a DC suspected as a whole: the DC is asked about, not the node.
        let dc = DcId(2);
        let nodes = nodes_of(&t, dc);
        let actions = f.tick(2, true, &view(&t, &m, &voters, &[dc], &nodes));
        let asked: Vec<Suspect> = asks(&actions).into_iter().map(|a| a.1).collect();
        assert_eq!(asked, vec![Suspect::Dc(dc)]);
        // A node alone, its DC not suspected: the node.
        let mut f = Failover::new(0);
        let node = nodes[1];
        let actions = f.tick(3, true, &view(&t, &m, &voters, &[], &[node]));
        assert_eq!(asks(&actions).into_iter().map(|a| a.1).collect::<Vec<_>>(), vec![Suspect::Node(node)]);
    }

    #[test]
    fn a_removal_the_membership_would_refuse_is_deferred_once_and_not_asked_about() {
        let t = topology();
        let mut m = membership(&t);
        let voters = voters(&t);
        m.apply(&Command::RemoveDc(DcId(1))).unwrap();
        // A second DC lost before the first is rebuilt: some partition would keep too few voters.
        let second = (2..4).map(DcId).find(|&d| m.check(&Command::RemoveDc(d)).is_err()).expect("a refused removal");
        let dcs = [second];
        let mut f = Failover::new(0);
        let first = f.tick(1, true, &view(&t, &m, &voters, &dcs, &[]));
        let deferred = first.iter().filter(|a| matches!(a, FailoverAction::Deferred { .. })).count();
        assert_eq!(deferred, 1, "{first:?}");
        assert!(!first.iter().any(|a| matches!(a, FailoverAction::AskVoters { .. })));
        let again = f.tick(1 + CONFIRM_EVERY_US, true, &view(&t, &m, &voters, &dcs, &[]));
        assert!(!again.iter().any(|a| matches!(a, FailoverAction::Deferred { .. })), "said once: {again:?}");
    }

    #[test]
    fn rebuild_steps_probe_removed_dcs_and_plan_learners_once_the_last_probes_are_back() {
        let t = topology();
        let mut m = membership(&t);
        let voters = voters(&t);
        let dead = DcId(1);
        m.apply(&Command::RemoveDc(dead)).unwrap();
        let live_voters: Vec<NodeId> = voters.iter().copied().filter(|v| t.nodes[v.0 as usize].dc != dead).collect();
        let mut f = Failover::new(0);
        assert!(f.tick(REBUILD_EVERY_US - 1, true, &view(&t, &m, &live_voters, &[dead], &[])).is_empty());
        let step = f.tick(REBUILD_EVERY_US, true, &view(&t, &m, &live_voters, &[], &[]));
        let probes: Vec<Probe> = step
            .iter()
            .filter_map(|a| match a {
                FailoverAction::Probe(p) => Some(p.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(probes, vec![Probe::RestoreDc { dc: dead, nodes: nodes_of(&t, dead) }]);
        let planned: Vec<Command> = m.plan_rebuild().into_iter().flat_map(|s| s.proposals).collect();
        let proposed = proposals(&step);
        assert!(!planned.is_empty() && proposed == planned, "{proposed:?} against {planned:?}");
        // Not again while the probe is out, however late.
        assert!(f.tick(10 * REBUILD_EVERY_US, true, &view(&t, &m, &live_voters, &[], &[])).is_empty());
        let found = Some(Command::RestoreDc(dead));
        assert_eq!(f.probed(found, true), vec![FailoverAction::Propose(Command::RestoreDc(dead))]);
        assert!(!f.tick(10 * REBUILD_EVERY_US, true, &view(&t, &m, &live_voters, &[], &[])).is_empty());
        // A finding that reaches a node no longer leading is not proposed.
        let mut g = Failover::new(0);
        g.tick(REBUILD_EVERY_US, true, &view(&t, &m, &live_voters, &[], &[]));
        assert!(g.probed(found, false).is_empty());
        // A learner planned on a node the detector suspects is left out.
        let on: Vec<NodeId> = planned
            .iter()
            .filter_map(|c| match c {
                Command::AddLearner { node, .. } => Some(*node),
                _ => None,
            })
            .collect();
        let mut h = Failover::new(0);
        let step = h.tick(REBUILD_EVERY_US, true, &view(&t, &m, &live_voters, &[], &on[..1]));
        assert!(proposals(&step).iter().all(|c| !matches!(c, Command::AddLearner { node, .. } if *node == on[0])));
    }
}
