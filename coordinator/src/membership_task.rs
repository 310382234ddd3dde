//! A real node's membership driver (docs/design.md, "Failover"): the node's peer of the
//! membership Raft group ([`RaftMembership`]: one voter per DC, the first node of each; every
//! other node a learner), its Raft messages over the node's QUIC transport (mutual TLS,
//! [`Body::Raft`]), its log on disk under the node's data directory, and the placement each
//! committed change makes, adopted by the node ([`Node::adopt`]).
//!
//! Removing a dead DC: the leader's failure detector suspects every node of a DC; the leader
//! then asks every other voter what its own detector says (a `Status` request), and once a
//! majority of the voters (itself included) suspect the DC it proposes
//! [`Command::RemoveDc`]. Committed, the change is applied by every peer in log order: a new
//! epoch whose partitions have no replica in that DC. A leader cut off with a minority
//! cannot gather the majority (its proposal would not commit anyway). A dead node whose DC is
//! otherwise alive is confirmed the same way and removed alone ([`Command::RemoveNode`]: its
//! replicas leave the placement, its DC stays), and restored ([`Command::RestoreNode`]) once
//! it answers again, holding nothing.
//!
//! The voters asked, and the majority counted, are the Raft group's current voters
//! ([`RaftMembership::voters`]): once the removal commits, [`RaftMembership`] demotes the
//! removed DC's voter to a Raft learner by a conf change, so on 4 DCs a second dead DC is
//! confirmed by 2 live voters of 3 and removed in turn. A restored DC votes again.
//!
//! Rebuilding (docs/design.md, "Rebuild"): the leader also restores a removed DC once one
//! of its nodes answers again ([`Command::RestoreDc`]: it holds no replica, nothing it held
//! is trusted), adds a learner for every replica a partition is short of
//! ([`Membership::plan_rebuild`], every [`Command::AddLearner`] of the plan at once), and promotes a
//! learner once its node reports the snapshot copy complete in its status
//! ([`Command::Promote`]; the copy itself is `crate::rebuild_task`'s).
//!
//! A thin driver: Raft's rules live in raft-rs and [`RaftMembership`], the
//! placement rules in [`redt_replication::Membership`], the confirmation rule in the pure
//! [`confirmed`]; this file moves their inputs and outputs.

use crate::error::{Error, Result};
use crate::membership_view::MembershipView;
use crate::node::Node;
use redt_proto::wire::{Body, RaftMsg, StatusRequest};
use redt_proto::{majority, DcId, NodeId, Topology};
use redt_protocol::epochs::placement_of;
use redt_replication::{Command, Membership, RaftMembership, RaftMessage, RaftTicks, Status};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Raft messages in flight to one peer at most; more are dropped (Raft resends).
const MAX_IN_FLIGHT: u32 = 64;
/// Raft messages queued for the driver at most; more are dropped (Raft resends).
/// How long the leader waits before asking the voters about the same DC again.
const CONFIRM_EVERY: Duration = Duration::from_millis(200);
/// How often the leader looks for a removed DC answering again, a partition short of
/// replicas, and a learner filled.
const REBUILD_EVERY: Duration = Duration::from_millis(500);

/// The Raft voters of `topology` (the first node of each DC) and its learners (every other
/// node), in id order.
pub fn raft_peers(topology: &Topology) -> (Vec<NodeId>, Vec<NodeId>) {
    let voters: Vec<NodeId> = topology.dcs.iter().filter_map(|d| d.nodes.first().copied()).collect();
    let learners = topology.nodes.iter().map(|n| n.id).filter(|n| !voters.contains(n)).collect();
    (voters, learners)
}

/// The length of one Raft tick on `topology`: its largest inter-DC RTT, between 20 ms and
/// 500 ms. With [`RaftTicks::default`] a leader heartbeats every 2 ticks and a lost leader is
/// replaced after 10 to 20 ticks.
pub fn tick_length(topology: &Topology) -> Duration {
    let rtt = topology.links.iter().flatten().map(|l| l.rtt).max().unwrap_or_default();
    rtt.clamp(Duration::from_millis(20), Duration::from_millis(500))
}

/// What the leader asks the voters about: a whole DC, or one node of a DC that is otherwise
/// alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
    fn suspected_in(self, s: &redt_proto::wire::StatusReply) -> bool {
        match self {
            Suspect::Dc(dc) => s.suspected_dcs.contains(&u32::from(dc.0)),
            Suspect::Node(node) => s.suspected_nodes.contains(&u32::from(node.0)),
        }
    }
}

impl Suspect {
    /// The suspect as `topology` names it: a DC's or a node's name.
    fn named(self, topology: &Topology) -> String {
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

/// Starts `node`'s membership driver, its Raft log in `dir` (`None`: in memory, lost with the
/// process — embedded clusters), fed by `inbox`.
///
/// # Errors
/// [`Error::Io`] outside a Tokio runtime; [`redt_protocol::Error::Topology`] if the Raft log cannot be opened
/// (another node's or group's directory, a corrupt file) or the group cannot be formed.
pub(crate) fn spawn(
    node: &Arc<Node>,
    dir: Option<PathBuf>,
    inbox: mpsc::Receiver<RaftMessage>,
    view: Arc<MembershipView>,
) -> Result<()> {
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| Error::Io(std::io::Error::other("a node's membership driver needs a Tokio runtime")))?;
    // Started with the node, before any placement change: the topology file's placement,
    // the initial membership every peer starts from (a restarted one re-applies its log).
    let base = node.topology();
    let peer = open(&base, node.id, dir.as_ref())?;
    if let Some(r) = peer.recovery() {
        tracing::info!(
            node = %node.name(),
            term = r.term,
            commit = r.commit,
            dropped_tail_bytes = r.dropped_tail_bytes,
            epoch = %peer.membership().epoch(),
            "membership log reopened"
        );
    }
    adopt(node, &base, peer.membership());
    runtime.spawn(run(Arc::downgrade(node), base, peer, dir, inbox, view));
    Ok(())
}

/// Opens (or creates) the Raft peer of `me` over `base`'s initial membership.
fn open(base: &Topology, me: NodeId, dir: Option<&PathBuf>) -> Result<RaftMembership> {
    let fail = |e: redt_replication::Error| Error::topology(format!("membership: {e}"));
    let factor = base.partitions.iter().map(|p| p.replicas.len()).max().unwrap_or(1);
    let membership = Membership::from_topology(base, factor).map_err(fail)?;
    let (voters, learners) = raft_peers(base);
    match dir {
        Some(dir) => RaftMembership::open(dir, me, &voters, &learners, membership, RaftTicks::default()),
        None => RaftMembership::new(me, &voters, &learners, membership, RaftTicks::default()),
    }
    .map_err(fail)
}

/// Makes `membership`'s placement the node's current one (a no-op if not newer), and starts
/// the rebuilds of the learners it puts on this node.
fn adopt(node: &Arc<Node>, base: &Topology, membership: &Membership) {
    if membership.epoch() > node.epochs.epoch() {
        node.adopt(Arc::new(placement_of(base, membership)));
    }
    crate::rebuild_task::start(node);
}

/// What one voter answered about a suspect: the round, the voter, whether it suspects it.
type Answer = (u64, NodeId, bool);

async fn run(
    node: Weak<Node>,
    base: Arc<Topology>,
    mut peer: RaftMembership,
    dir: Option<PathBuf>,
    mut inbox: mpsc::Receiver<RaftMessage>,
    view: Arc<MembershipView>,
) {
    let mut tick = tokio::time::interval(tick_length(&base));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let in_flight: Arc<std::sync::Mutex<HashMap<NodeId, u32>>> = Arc::default();
    // The confirmation under way: its round, the suspect, the voters suspecting it so far.
    let mut round = 0u64;
    let mut asking: Option<(u64, Suspect, BTreeSet<NodeId>)> = None;
    let mut asked_at: HashMap<Suspect, Instant> = HashMap::new();
    let mut deferred: HashSet<Suspect> = HashSet::new();
    let mut answers: JoinSet<Answer> = JoinSet::new();
    let mut probes: JoinSet<Option<Command>> = JoinSet::new();
    let mut last_rebuild_step = Instant::now();
    loop {
        let Some(n) = node.upgrade().filter(|n| !n.is_closed()) else { return };
        let step = tokio::select! {
            _ = tick.tick() => {
                let r = peer.handle_tick();
                if r.is_ok() && peer.is_leader() && asking.is_none() {
                    if let Some(suspect) = next_suspect(&n, &peer, &asked_at, &mut deferred) {
                        asked_at.insert(suspect, Instant::now());
                        round += 1;
                        asking = Some((round, suspect, BTreeSet::from([n.id])));
                        // The current voters: a removed DC's voter no longer counts.
                        ask_voters(&n, &peer.voters(), suspect, round, &mut answers);
                    }
                }
                if r.is_ok() && peer.is_leader() && probes.is_empty() && last_rebuild_step.elapsed() >= REBUILD_EVERY {
                    last_rebuild_step = Instant::now();
                    rebuild_step(&n, &mut peer, &mut probes)
                } else {
                    r
                }
            }
            Some(Ok(found)) = probes.join_next() => match found {
                Some(command) if peer.is_leader() => propose_quietly(&n, &mut peer, &command),
                _ => Ok(()),
            },
            Some(m) = inbox.recv() => peer.handle_message(m),
            Some(Ok((r, voter, suspects))) = answers.join_next() => {
                if let Some((ar, suspect, suspecting)) = asking.as_mut() {
                    if *ar == r && suspects {
                        suspecting.insert(voter);
                    }
                    let suspect = *suspect;
                    if confirmed(peer.membership(), &peer.voters(), suspect, suspecting) {
                        asking = None;
                        answers.abort_all();
                        tracing::warn!(node = %n.name(), suspect = %suspect.named(&n.topology()), "a majority of the voters suspect it: proposing its removal");
                        match peer.propose(&suspect.removal()) {
                            // Leadership moved while the voters were asked: the new leader
                            // asks again. Not a failure of the peer.
                            Err(e @ (redt_replication::Error::NotLeader { .. } | redt_replication::Error::Raft(_))) => {
                                tracing::info!(node = %n.name(), suspect = %suspect.named(&n.topology()), "removal not proposed: {e}");
                                Ok(())
                            }
                            r => r,
                        }
                    } else {
                        if answers.is_empty() {
                            asking = None;
                        }
                        Ok(())
                    }
                } else {
                    Ok(())
                }
            }
        };
        if let Err(e) = step {
            tracing::error!(node = %n.name(), "membership peer failed: {e}; reopening it");
            match open(&base, n.id, dir.as_ref()) {
                Ok(p) => peer = p,
                Err(e) => {
                    tracing::error!(node = %n.name(), "membership peer cannot be reopened: {e}; it stops");
                    return;
                }
            }
        }
        while let Some(m) = peer.poll_message() {
            send(&n, m, &in_flight);
        }
        let mut changed = false;
        while let Some(a) = peer.poll_applied() {
            match a.outcome {
                Ok(c) => {
                    tracing::info!(node = %n.name(), index = a.index, command = %a.command.named(&n.topology()), "membership change applied");
                    changed |= c.placement_changed();
                }
                Err(why) => {
                    let t = n.topology();
                    tracing::info!(node = %n.name(), index = a.index, command = %a.command.named(&t), "membership change refused: {}", why.named(&t))
                }
            }
        }
        if changed {
            adopt(&n, &base, peer.membership());
        }
        while let Some(c) = peer.poll_conf_change() {
            let t = n.topology();
            let voters: Vec<String> = peer.voters().into_iter().map(|v| t.node_name(v)).collect();
            let changes: Vec<String> = c
                .changes
                .iter()
                .map(|r| {
                    let who = redt_replication::node_of(r.raft_id)
                        .map_or_else(|| format!("raft id {}", r.raft_id), |v| t.node_name(v));
                    format!("{who}: {:?}", r.role)
                })
                .collect();
            tracing::info!(node = %n.name(), index = c.index, ?changes, outcome = ?c.outcome, ?voters, "raft conf change applied");
        }
        let leader = peer.leader().and_then(redt_replication::node_of).map_or(0, |l| u32::from(l.0) + 1);
        view.leader.store(leader, Ordering::Relaxed);
    }
}

/// What the leader `n` should ask the voters about, not asked within [`CONFIRM_EVERY`]: a DC
/// its own detector suspects, still up in the membership, not its own; else a node it
/// suspects whose DC it does not suspect as a whole (its own DC's included), still up in the
/// membership, holding a replica of some partition (a node that holds none costs nothing
/// while it is down, and removing it would change no placement).
fn next_suspect(
    n: &Node,
    peer: &RaftMembership,
    asked_at: &HashMap<Suspect, Instant>,
    deferred: &mut HashSet<Suspect>,
) -> Option<Suspect> {
    let my_dc = n.topology().nodes.get(n.id.0 as usize).map(|x| x.dc)?;
    let membership = peer.membership();
    // A removal the membership would refuse (a second replica of a partition lost before the
    // first is rebuilt: `Refused::TooFewVoters`) is not asked about, and so never proposed:
    // the suspect stays placed and is waited for. Said once per suspect, at WARN.
    let mut removable = |s: &Suspect| match membership.check(&s.removal()) {
        Ok(()) => {
            deferred.remove(s);
            true
        }
        Err(why) => {
            if deferred.insert(*s) {
                let t = n.topology();
                tracing::warn!(node = %n.name(), suspect = %s.named(&t), "removal deferred: {}", why.named(&t));
            }
            false
        }
    };
    let due = |s: &Suspect| asked_at.get(s).is_none_or(|t| t.elapsed() >= CONFIRM_EVERY);
    let dcs = n.board.suspected_dcs();
    let dc = dcs
        .iter()
        .copied()
        .filter(|&d| d != my_dc && membership.dc_status(d) == Some(Status::Up))
        .map(Suspect::Dc)
        .filter(|s| due(s))
        .find(|s| removable(s));
    dc.or_else(|| {
        let topology = n.topology();
        n.board
            .suspected_nodes()
            .into_iter()
            .filter(|&x| x != n.id && membership.node_status(x) == Some(Status::Up))
            .filter(|x| topology.nodes.get(x.0 as usize).is_some_and(|t| !dcs.contains(&t.dc)))
            .filter(|&x| membership.partitions().any(|(_, r)| r.nodes().any(|m| m == x)))
            .map(Suspect::Node)
            .filter(|s| due(s))
            .find(|s| removable(s))
    })
}

/// Proposes `command`; a proposal refused because leadership moved is not a failure of the
/// peer (the new leader makes its own).
fn propose_quietly(n: &Node, peer: &mut RaftMembership, command: &Command) -> redt_replication::Result<()> {
    let named = command.named(&n.topology());
    tracing::info!(node = %n.name(), command = %named, "membership: proposing");
    match peer.propose(command) {
        Err(e @ (redt_replication::Error::NotLeader { .. } | redt_replication::Error::Raft(_))) => {
            tracing::info!(node = %n.name(), command = %named, "not proposed: {e}");
            Ok(())
        }
        r => r,
    }
}

/// One step of the leader's rebuild work: proposes every learner the partitions are short of
/// (on nodes its detector does not suspect), and asks the nodes of removed DCs whether they
/// are back and the learners' nodes whether their copy is complete (their answers come back
/// through `probes` as the command to propose).
fn rebuild_step(
    n: &Arc<Node>,
    peer: &mut RaftMembership,
    probes: &mut JoinSet<Option<Command>>,
) -> redt_replication::Result<()> {
    let membership = peer.membership().clone();
    let wait = tick_length(&n.topology()) * 4;
    let topology = n.topology();
    for (dc, status) in membership.dcs() {
        if status != Status::Removed {
            continue;
        }
        let nodes = topology.dcs.get(dc.0 as usize).map(|d| d.nodes.clone()).unwrap_or_default();
        let n = n.clone();
        probes.spawn(async move {
            for node in nodes {
                if status_of(&n, node, wait).await.is_some() {
                    return Some(Command::RestoreDc(dc));
                }
            }
            None
        });
    }
    // A node removed on its own (its DC up) is restored once it answers, as a DC is.
    for (node, dc, status) in membership.nodes() {
        if status != Status::Removed || membership.dc_status(dc) != Some(Status::Up) {
            continue;
        }
        let n = n.clone();
        probes.spawn(async move { status_of(&n, node, wait).await.map(|_| Command::RestoreNode(node)) });
    }
    for (partition, replicas) in membership.partitions() {
        for learner in replicas.learners() {
            let (n, learner) = (n.clone(), *learner);
            probes.spawn(async move {
                let status = status_of(&n, learner.node, wait).await?;
                let filled = status
                    .rebuilds
                    .iter()
                    .any(|r| r.partition == partition.0 && r.added_in == learner.added_in.0 && r.filled);
                filled.then_some(Command::Promote { partition, node: learner.node, added_in: learner.added_in })
            });
        }
    }
    // Every learner the partitions are short of, at once (each its own log entry, valid in
    // order against the current state), on nodes the detector does not suspect.
    let suspected = n.board.suspected_nodes();
    for command in membership.plan_rebuild().into_iter().flat_map(|s| s.proposals) {
        if matches!(command, Command::AddLearner { node, .. } if suspected.contains(&node)) {
            continue;
        }
        propose_quietly(n, peer, &command)?;
    }
    Ok(())
}

/// `node`'s status (this node's own without the network), or `None` if it does not answer
/// within `wait`.
async fn status_of(n: &Arc<Node>, node: NodeId, wait: Duration) -> Option<redt_proto::wire::StatusReply> {
    if node == n.id {
        return n.status(false).await.ok().map(|s| s.to_wire());
    }
    let envelope = n.envelope(Body::Status(StatusRequest { count_locks: false }));
    match tokio::time::timeout(wait, n.transport().call(node, envelope)).await {
        Ok(Ok(r)) => match r.body {
            Some(Body::NodeStatus(s)) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

/// Asks every voter but `n` itself whether it suspects `suspect` (its `redt status` view).
fn ask_voters(n: &Arc<Node>, voters: &[NodeId], suspect: Suspect, round: u64, answers: &mut JoinSet<Answer>) {
    for &v in voters.iter().filter(|&&v| v != n.id) {
        let envelope = n.envelope(Body::Status(StatusRequest { count_locks: false }));
        let transport = n.transport().clone();
        let wait = tick_length(&n.topology()) * 4;
        answers.spawn(async move {
            let reply = tokio::time::timeout(wait, transport.call(v, envelope)).await;
            let suspects = match reply {
                Ok(Ok(r)) => match r.body {
                    Some(Body::NodeStatus(s)) => suspect.suspected_in(&s),
                    _ => false,
                },
                _ => false,
            };
            (round, v, suspects)
        });
    }
}

/// Sends one Raft message in the background (dropped if too many are in flight to its peer).
fn send(n: &Arc<Node>, m: RaftMessage, in_flight: &Arc<std::sync::Mutex<HashMap<NodeId, u32>>>) {
    let Some(to) = redt_replication::node_of(m.to) else { return };
    {
        let mut f = in_flight.lock().unwrap_or_else(|p| p.into_inner());
        let c = f.entry(to).or_default();
        if *c >= MAX_IN_FLIGHT {
            return;
        }
        *c += 1;
    }
    let data = redt_replication::encode_message(&m);
    let envelope = n.envelope(Body::Raft(RaftMsg { data }));
    let transport = n.transport().clone();
    let topology = n.topology();
    let in_flight = in_flight.clone();
    tokio::spawn(async move {
        match transport.call(to, envelope).await {
            Ok(reply) => {
                if let Some(Body::Error(e)) = reply.body {
                    tracing::debug!(to = %topology.node_name(to), "Raft message refused: {}", e.message);
                }
            }
            Err(e) => tracing::trace!(to = %topology.node_name(to), "Raft message not delivered: {e}"),
        }

        if let Some(c) = in_flight.lock().unwrap_or_else(|p| p.into_inner()).get_mut(&to) {
            *c = c.saturating_sub(1);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology() -> Topology {
        Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("default.yaml is valid")
    }

    #[test]
    fn one_voter_per_dc_and_every_other_node_learns() {
        let t = topology();
        let (voters, learners) = raft_peers(&t);
        assert_eq!(voters.len(), t.dcs.len());
        assert_eq!(voters.len() + learners.len(), t.nodes.len());
        for d in &t.dcs {
            assert!(voters.contains(&d.nodes[0]));
        }
    }

    #[test]
    fn a_majority_of_voters_confirms_a_removal_once() {
        let t = topology();
        let factor = t.partitions.iter().map(|p| p.replicas.len()).max().unwrap();
        let mut m = Membership::from_topology(&t, factor).unwrap();
        let (voters, _) = raft_peers(&t);
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
        assert_eq!(redt_protocol::epochs::removed_dcs(&p), vec![dead]);
    }

    #[test]
    fn a_majority_of_voters_confirms_a_node_removal_once() {
        let t = topology();
        let factor = t.partitions.iter().map(|p| p.replicas.len()).max().unwrap();
        let mut m = Membership::from_topology(&t, factor).unwrap();
        let (voters, _) = raft_peers(&t);
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
        assert!(redt_protocol::epochs::removed_dcs(&p).is_empty(), "its DC stays");
    }

    #[test]
    fn ticks_follow_the_rtt_within_bounds() {
        let t = topology();
        let rtt = t.links.iter().flatten().map(|l| l.rtt).max().unwrap();
        assert_eq!(tick_length(&t), rtt.clamp(Duration::from_millis(20), Duration::from_millis(500)));
    }
}
