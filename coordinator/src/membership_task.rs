//! A real node's membership driver (docs/design.md, "Failover"): the node's peer of the
//! membership Raft group ([`RaftMembership`]: one voter per DC, the first node of each; every
//! other node a learner), its Raft messages over the node's QUIC transport (mutual TLS,
//! [`Body::Raft`]), its log on disk under the node's data directory, and the placement each
//! committed change makes, adopted by the node ([`Node::adopt`]).
//!
//! The leader's failover policy — which suspect to ask the voters about, when a majority
//! confirms its removal, what to probe and propose to restore and rebuild — is the pure
//! [`Failover`] machine (`redt_protocol::failover`, whose docs give the rules). The voters
//! asked, and the majority counted, are the Raft group's current voters
//! ([`RaftMembership::voters`]): once a removal commits, [`RaftMembership`] demotes the removed
//! DC's voter to a Raft learner by a conf change, so on 4 DCs a second dead DC is confirmed by
//! 2 live voters of 3 and removed in turn. A restored DC votes again. A learner's copy itself
//! is `crate::rebuild_task`'s.
//!
//! A thin driver: Raft's rules live in raft-rs and [`RaftMembership`], the placement rules in
//! [`redt_membership::Membership`], the failover policy in [`Failover`]; this file moves their
//! inputs and outputs (ticks, Raft messages, voters' status answers, probes) and carries out
//! what they decide.

use crate::error::{Error, Result};
use crate::membership_view::MembershipView;
use crate::node::Node;
use redt_membership::{Command, Membership, RaftMembership, RaftMessage, RaftTicks};
use redt_proto::wire::{Body, RaftMsg, StatusRequest};
use redt_proto::{NodeId, Topology};
use redt_protocol::epochs::placement_of;
use redt_protocol::failover::{Failover, FailoverAction, LeaderView, Probe, Suspect};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Raft messages in flight to one peer at most; more are dropped (Raft resends).
const MAX_IN_FLIGHT: u32 = 64;

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
    let base = node.placement().as_topology().clone();
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
    let fail = |e: redt_membership::Error| Error::topology(format!("membership: {e}"));
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
        node.adopt(placement_of(base, membership));
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
    let origin = Instant::now();
    let now_us = || origin.elapsed().as_micros() as u64;
    let mut failover = Failover::new(now_us());
    let mut answers: JoinSet<Answer> = JoinSet::new();
    let mut probes: JoinSet<Option<Command>> = JoinSet::new();
    loop {
        let Some(n) = node.upgrade().filter(|n| !n.is_closed()) else { return };
        let step = tokio::select! {
            _ = tick.tick() => match peer.handle_tick() {
                // Only a leader's policy acts: a follower reads nothing for it.
                Ok(()) if !peer.is_leader() => Ok(()),
                Ok(()) => {
                    let (topology, voters) = (n.placement(), peer.voters());
                    let (dcs, nodes) = (n.board.suspected_dcs(), n.board.suspected_nodes());
                    let view = LeaderView {
                        me: n.id,
                        topology: &topology,
                        membership: peer.membership(),
                        voters: &voters,
                        suspected_dcs: &dcs,
                        suspected_nodes: &nodes,
                    };
                    let actions = failover.tick(now_us(), peer.is_leader(), &view);
                    carry_out(&n, &mut peer, actions, &mut answers, &mut probes)
                }
                e => e,
            },
            // A probe that failed to run found nothing.
            Some(found) = probes.join_next() => {
                let actions = failover.probed(found.ok().flatten(), peer.is_leader());
                carry_out(&n, &mut peer, actions, &mut answers, &mut probes)
            }
            Some(m) = inbox.recv() => peer.handle_message(m),
            Some(Ok((round, voter, suspects))) = answers.join_next() => {
                let voters = peer.voters();
                let actions = failover.answer(round, voter, suspects, peer.membership(), &voters);
                carry_out(&n, &mut peer, actions, &mut answers, &mut probes)
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
                    tracing::info!(node = %n.name(), index = a.index, command = %a.command.named(&n.placement()), "membership change applied");
                    changed |= c.placement_changed();
                }
                Err(why) => {
                    let t = n.placement();
                    tracing::info!(node = %n.name(), index = a.index, command = %a.command.named(&t), "membership change refused: {}", why.named(&t))
                }
            }
        }
        if changed {
            adopt(&n, &base, peer.membership());
        }
        while let Some(c) = peer.poll_conf_change() {
            let t = n.placement();
            let voters: Vec<String> = peer.voters().into_iter().map(|v| t.node_name(v)).collect();
            let changes: Vec<String> = c
                .changes
                .iter()
                .map(|r| {
                    let who = redt_membership::node_of(r.raft_id)
                        .map_or_else(|| format!("raft id {}", r.raft_id), |v| t.node_name(v));
                    format!("{who}: {:?}", r.role)
                })
                .collect();
            tracing::info!(node = %n.name(), index = c.index, ?changes, outcome = ?c.outcome, ?voters, "raft conf change applied");
        }
        let leader = peer.leader().and_then(redt_membership::node_of).map_or(0, |l| u32::from(l.0) + 1);
        view.leader.store(leader, Ordering::Relaxed);
    }
}

/// Proposes `command`; a proposal refused because leadership moved is not a failure of the
/// peer (the new leader makes its own).
fn propose_quietly(n: &Node, peer: &mut RaftMembership, command: &Command) -> redt_membership::Result<()> {
    let named = command.named(&n.placement());
    tracing::info!(node = %n.name(), command = %named, "membership: proposing");
    match peer.propose(command) {
        Err(e @ (redt_membership::Error::NotLeader { .. } | redt_membership::Error::Raft(_))) => {
            tracing::info!(node = %n.name(), command = %named, "not proposed: {e}");
            Ok(())
        }
        r => r,
    }
}

/// Carries out what the failover policy decided: asks the voters, proposes (a removal, a
/// learner, a restore, a promotion), spawns the probes. A proposal refused because leadership
/// moved is not a failure of the peer (the new leader decides its own); another failure is
/// returned once every action has been carried out (the probes the policy counts on are
/// spawned whatever a proposal before them did).
fn carry_out(
    n: &Arc<Node>,
    peer: &mut RaftMembership,
    actions: Vec<FailoverAction>,
    answers: &mut JoinSet<Answer>,
    probes: &mut JoinSet<Option<Command>>,
) -> redt_membership::Result<()> {
    let mut failed = Ok(());
    let mut keep = |r: redt_membership::Result<()>| {
        if failed.is_ok() {
            failed = r;
        }
    };
    for action in actions {
        match action {
            FailoverAction::AskVoters { round, suspect, voters } => ask_voters(n, &voters, suspect, round, answers),
            FailoverAction::Remove(suspect) => {
                answers.abort_all();
                let t = n.placement();
                tracing::warn!(node = %n.name(), suspect = %suspect.named(&t), "a majority of the voters suspect it: proposing its removal");
                match peer.propose(&suspect.removal()) {
                    Err(e @ (redt_membership::Error::NotLeader { .. } | redt_membership::Error::Raft(_))) => {
                        tracing::info!(node = %n.name(), suspect = %suspect.named(&t), "removal not proposed: {e}");
                    }
                    r => keep(r),
                }
            }
            FailoverAction::Deferred { suspect, why } => {
                let t = n.placement();
                tracing::warn!(node = %n.name(), suspect = %suspect.named(&t), "removal deferred: {}", why.named(&t));
            }
            FailoverAction::Probe(list) => {
                for probe in list {
                    spawn_probe(n, probe, probes);
                }
            }
            FailoverAction::Propose(command) => keep(propose_quietly(n, peer, &command)),
        }
    }
    failed
}

/// Runs `probe` in the background: asks the nodes it names for their status; yields the
/// probe's command when it finds what it looks for.
fn spawn_probe(n: &Arc<Node>, probe: Probe, probes: &mut JoinSet<Option<Command>>) {
    let wait = tick_length(&n.placement()) * 4;
    let n = n.clone();
    probes.spawn(async move {
        match &probe {
            Probe::RestoreDc { nodes, .. } => {
                for &node in nodes {
                    if status_of(&n, node, wait).await.is_some() {
                        return Some(probe.command());
                    }
                }
                None
            }
            Probe::RestoreNode(node) => status_of(&n, *node, wait).await.map(|_| probe.command()),
            Probe::Promote { partition, node, added_in } => {
                let status = status_of(&n, *node, wait).await?;
                let filled =
                    status.rebuilds.iter().any(|r| r.partition == partition.0 && r.added_in == added_in.0 && r.filled);
                filled.then(|| probe.command())
            }
        }
    });
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
        let wait = tick_length(&n.placement()) * 4;
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
    let Some(to) = redt_membership::node_of(m.to) else { return };
    {
        let mut f = in_flight.lock().unwrap_or_else(|p| p.into_inner());
        let c = f.entry(to).or_default();
        if *c >= MAX_IN_FLIGHT {
            return;
        }
        *c += 1;
    }
    let data = redt_membership::encode_message(&m);
    let envelope = n.envelope(Body::Raft(RaftMsg { data }));
    let transport = n.transport().clone();
    let topology = n.placement();
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
    fn ticks_follow_the_rtt_within_bounds() {
        let t = topology();
        let rtt = t.links.iter().flatten().map(|l| l.rtt).max().unwrap();
        assert_eq!(tick_length(&t), rtt.clamp(Duration::from_millis(20), Duration::from_millis(500)));
    }
}
