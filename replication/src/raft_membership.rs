//! Membership replicated by Raft across DCs: a thin sans-IO driver of raft-rs's `RawNode` over
//! its in-memory `MemStorage`, whose committed log entries are [`Command`]s applied in order
//! to a [`Membership`] (notes/failover.md "State").
//!
//! One node per DC is a Raft voter; the other nodes are Raft learners that receive and apply
//! the same log without voting. A Raft peer's id is its node id plus one ([`raft_id`]), since
//! raft-rs reserves id 0.
//!
//! # Use
//!
//! The driver calls [`RaftMembership::handle_tick`] every tick (its own timer; a tick length
//! of about the largest inter-DC RTT suits the defaults), [`RaftMembership::handle_message`]
//! for each Raft message from a peer, and [`RaftMembership::propose`] on the leader; after each
//! call it drains [`RaftMembership::poll_message`] (send each to the peer `msg.to`, e.g. as
//! protobuf bytes over QUIC) and [`RaftMembership::poll_applied`] (each committed command, in
//! log order, with its outcome). Nothing here sleeps, sends or writes to disk.
//!
//! # Limits of this first step
//!
//! - The log lives in memory (`MemStorage`) and is never compacted, so no snapshot is ever
//!   sent; a durable `Storage` and a snapshot of [`Membership`] come with the wiring.
//! - Raft's own configuration (which nodes vote) is fixed at start: removing a DC from the
//!   placement does not yet remove its voter from the Raft group. With one voter per DC, a
//!   removed DC still counts in Raft's majority until a Raft conf change removes it.
//! - raft-rs draws each election timeout from a thread-local random number generator
//!   (`rand::thread_rng`); the timing of elections is therefore not seeded. The outcome of
//!   the tests below does not depend on it; a deterministic simulation pins the timeout with
//!   `RawNode::raft.set_randomized_election_timeout` or calls [`RaftMembership::campaign`].
//! - raft-rs panics on some messages that only a faulty peer would send (e.g. a commit index
//!   beyond the log it was sent); peers are authenticated by the cluster's mutual TLS.

use raft::eraftpb::{ConfState, EntryType, Message};
use raft::storage::MemStorage;
use raft::{Config, RawNode, StateRole};
use redt_proto::NodeId;
use std::collections::{BTreeSet, VecDeque};

use crate::error::{Error, Result};
use crate::membership::{Change, Command, Membership, Refused};

/// Returns the Raft peer id of `node`: its id plus one (raft-rs reserves 0).
pub fn raft_id(node: NodeId) -> u64 {
    u64::from(node.0) + 1
}

/// Returns the node of a Raft peer id, or `None` for 0 or an id beyond the node id range.
pub fn node_of(raft_id: u64) -> Option<NodeId> {
    raft_id.checked_sub(1).and_then(|n| u16::try_from(n).ok()).map(NodeId)
}

/// Raft timing in ticks (the driver chooses the tick length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaftTicks {
    /// Ticks without a leader's message before a follower campaigns (raft-rs randomizes it in
    /// `[election, 2 · election)`); also the leader's quorum check period.
    pub election: usize,
    /// Ticks between the leader's heartbeats; less than `election`.
    pub heartbeat: usize,
}

impl Default for RaftTicks {
    /// 10 and 2 ticks: with a 50 ms tick between DCs 40 ms apart, a leader heartbeats every
    /// 100 ms and a lost leader is replaced after 0.5 to 1 s.
    fn default() -> Self {
        RaftTicks { election: 10, heartbeat: 2 }
    }
}

/// One committed command and what applying it did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// Its Raft log index.
    pub index: u64,
    /// The command.
    pub command: Command,
    /// The change it made, or why the membership refused it (the same on every peer).
    pub outcome: std::result::Result<Change, Refused>,
}

/// One peer of the membership Raft group (module docs give the call order).
pub struct RaftMembership {
    node: RawNode<MemStorage>,
    membership: Membership,
    messages: VecDeque<Message>,
    applied: VecDeque<Applied>,
    undecodable: u64,
}

impl RaftMembership {
    /// Starts the peer on `node` of a fresh group whose voters are `voters` (one node per DC)
    /// and whose learners are `learners`, from the initial `membership` (every peer must start
    /// from the same one).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRaftPeers`] if `node` is in neither list, a node is listed twice or is
    /// not a member, or two voters share a DC; [`Error::Raft`] if raft-rs refuses the
    /// configuration (e.g. `ticks.heartbeat >= ticks.election`).
    pub fn new(
        node: NodeId,
        voters: &[NodeId],
        learners: &[NodeId],
        membership: Membership,
        ticks: RaftTicks,
    ) -> Result<Self> {
        let invalid = |m: String| Err(Error::InvalidRaftPeers(m));
        let mut seen = BTreeSet::new();
        let mut voter_dcs = BTreeSet::new();
        for (i, &n) in voters.iter().chain(learners).enumerate() {
            let Some(dc) = membership.dc_of(n) else { return invalid(format!("{n} is not a member")) };
            if !seen.insert(n) {
                return invalid(format!("{n} is listed twice"));
            }
            if i < voters.len() && !voter_dcs.insert(dc) {
                return invalid(format!("two voters in {dc}"));
            }
        }
        if !seen.contains(&node) {
            return invalid(format!("{node} is neither a voter nor a learner"));
        }
        let config = Config {
            id: raft_id(node),
            election_tick: ticks.election,
            heartbeat_tick: ticks.heartbeat,
            check_quorum: true,
            pre_vote: true,
            ..Config::default()
        };
        config.validate()?;
        let conf = ConfState::from((voters.iter().map(|&n| raft_id(n)), learners.iter().map(|&n| raft_id(n))));
        let storage = MemStorage::new_with_conf_state(conf);
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let node = RawNode::new(&config, storage, &logger)?;
        Ok(RaftMembership { node, membership, messages: VecDeque::new(), applied: VecDeque::new(), undecodable: 0 })
    }

    // ---- inputs ---------------------------------------------------------------------------

    /// Advances Raft's logical clock by one tick.
    pub fn handle_tick(&mut self) -> Result<()> {
        self.node.tick();
        self.process_ready()
    }

    /// Takes one Raft message from a peer.
    ///
    /// # Errors
    ///
    /// [`Error::Raft`] if raft-rs refuses it (a local message type, a message from a peer
    /// outside the group, ...); the peer's state is unchanged then.
    pub fn handle_message(&mut self, message: Message) -> Result<()> {
        self.node.step(message)?;
        self.process_ready()
    }

    /// Starts an election now instead of waiting for the election timeout (a leadership
    /// transfer, or a test that wants a known leader).
    ///
    /// # Errors
    ///
    /// [`Error::Raft`] as raft-rs reports it.
    pub fn campaign(&mut self) -> Result<()> {
        self.node.campaign()?;
        self.process_ready()
    }

    /// Proposes `command` to the group. It is applied (on every peer) once a majority of the
    /// voters has it, which [`RaftMembership::poll_applied`] reports; a leader cut off from
    /// the majority accepts the proposal but never commits it, and a later leader may drop it.
    ///
    /// # Errors
    ///
    /// [`Error::NotLeader`] on a peer that is not the leader (with the leader it knows);
    /// [`Error::Codec`] if the command does not encode; [`Error::Raft`] if raft-rs drops the
    /// proposal (e.g. during a leadership transfer).
    pub fn propose(&mut self, command: &Command) -> Result<()> {
        if self.node.raft.state != StateRole::Leader {
            let leader = self.leader();
            return Err(Error::NotLeader { leader });
        }
        let data = serde_json::to_vec(command)?;
        self.node.propose(Vec::new(), data)?;
        self.process_ready()
    }

    // ---- outputs --------------------------------------------------------------------------

    /// Returns the next Raft message to send (to the peer `message.to`, a [`raft_id`]).
    pub fn poll_message(&mut self) -> Option<Message> {
        self.messages.pop_front()
    }

    /// Returns the next committed command applied to the membership, in log order.
    pub fn poll_applied(&mut self) -> Option<Applied> {
        self.applied.pop_front()
    }

    // ---- getters --------------------------------------------------------------------------

    /// Returns the membership as of the last applied command.
    pub fn membership(&self) -> &Membership {
        &self.membership
    }

    /// Returns whether this peer is the Raft leader.
    pub fn is_leader(&self) -> bool {
        self.node.raft.state == StateRole::Leader
    }

    /// Returns the Raft id of the leader this peer knows of, if any.
    pub fn leader(&self) -> Option<u64> {
        Some(self.node.raft.leader_id).filter(|&id| id != raft::INVALID_ID)
    }

    /// Returns this peer's current Raft term.
    pub fn term(&self) -> u64 {
        self.node.raft.term
    }

    /// Returns how many committed entries did not decode as a [`Command`] and were skipped
    /// (the same on every peer: they are the same bytes).
    pub fn undecodable_entries(&self) -> u64 {
        self.undecodable
    }

    // ---- the Ready loop -------------------------------------------------------------------

    /// Handles every pending `Ready` in raft-rs's order: send messages, apply a snapshot,
    /// apply committed entries, persist new entries and the hard state, send the messages
    /// that waited for persistence, advance.
    fn process_ready(&mut self) -> Result<()> {
        while self.node.has_ready() {
            let mut ready = self.node.ready();
            self.messages.extend(ready.take_messages());
            if !ready.snapshot().is_empty() {
                return Err(Error::SnapshotUnsupported);
            }
            self.apply_entries(ready.take_committed_entries());
            self.node.mut_store().wl().append(ready.entries())?;
            if let Some(hs) = ready.hs() {
                self.node.mut_store().wl().set_hardstate(hs.clone());
            }
            self.messages.extend(ready.take_persisted_messages());
            let mut light = self.node.advance(ready);
            if let Some(commit) = light.commit_index() {
                self.node.mut_store().wl().mut_hard_state().set_commit(commit);
            }
            self.messages.extend(light.take_messages());
            self.apply_entries(light.take_committed_entries());
            self.node.advance_apply();
        }
        Ok(())
    }

    fn apply_entries(&mut self, entries: Vec<raft::eraftpb::Entry>) {
        for entry in entries {
            // The leader's empty entry on election, and conf changes (never proposed here).
            if entry.get_entry_type() != EntryType::EntryNormal || entry.data.is_empty() {
                continue;
            }
            match serde_json::from_slice::<Command>(&entry.data) {
                Ok(command) => {
                    let outcome = self.membership.apply(&command);
                    self.applied.push_back(Applied { index: entry.index, command, outcome });
                }
                Err(_) => self.undecodable += 1,
            }
        }
    }
}

impl std::fmt::Debug for RaftMembership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftMembership")
            .field("id", &self.node.raft.id)
            .field("role", &self.node.raft.state)
            .field("term", &self.node.raft.term)
            .field("epoch", &self.membership.epoch())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_proto::{DcId, Epoch, PartitionId};
    use std::collections::BTreeMap;

    #[test]
    fn raft_ids_are_node_ids_plus_one() {
        assert_eq!(raft_id(NodeId(0)), 1);
        assert_eq!(node_of(1), Some(NodeId(0)));
        assert_eq!(node_of(raft_id(NodeId(u16::MAX))), Some(NodeId(u16::MAX)));
        assert_eq!(node_of(0), None);
        assert_eq!(node_of(u64::from(u16::MAX) + 2), None);
    }

    /// 3 DCs × 2 nodes (nodes 2d, 2d+1 in DC d), 3 partitions of n = 3.
    fn membership() -> Membership {
        let nodes = (0..6).map(|n| (NodeId(n), DcId(n / 2)));
        let partitions =
            (0..3u32).map(|p| (PartitionId(p), (0..3).map(|d| NodeId(2 * ((p as u16 + d) % 3))).collect()));
        Membership::new(Epoch(1), nodes, partitions, 3).unwrap()
    }

    const VOTERS: [NodeId; 3] = [NodeId(0), NodeId(2), NodeId(4)];
    const LEARNER: NodeId = NodeId(1);

    /// The group's peers and an in-memory network between them, driven by the test (after
    /// raft-rs's harness `Network`): no threads, no sockets, no clock.
    struct Group {
        peers: BTreeMap<u64, RaftMembership>,
        /// Peers cut off from everyone else.
        isolated: BTreeSet<u64>,
        /// Every command applied, per peer.
        applied: BTreeMap<u64, Vec<Applied>>,
    }

    impl Group {
        fn new() -> Self {
            let mut peers = BTreeMap::new();
            for &n in VOTERS.iter().chain([&LEARNER]) {
                let peer = RaftMembership::new(n, &VOTERS, &[LEARNER], membership(), RaftTicks::default()).unwrap();
                peers.insert(raft_id(n), peer);
            }
            Group { peers, isolated: BTreeSet::new(), applied: BTreeMap::new() }
        }

        fn peer(&mut self, node: NodeId) -> &mut RaftMembership {
            self.peers.get_mut(&raft_id(node)).unwrap()
        }

        /// Delivers messages until none is left; messages across the cut are dropped.
        fn deliver(&mut self) {
            loop {
                let mut batch = Vec::new();
                for peer in self.peers.values_mut() {
                    batch.extend(std::iter::from_fn(|| peer.poll_message()));
                }
                self.collect_applied();
                if batch.is_empty() {
                    return;
                }
                for m in batch {
                    let cut = self.isolated.contains(&m.from) != self.isolated.contains(&m.to);
                    if let (false, Some(to)) = (cut, self.peers.get_mut(&m.to)) {
                        to.handle_message(m).unwrap();
                    }
                }
            }
        }

        fn collect_applied(&mut self) {
            for (&id, peer) in self.peers.iter_mut() {
                self.applied.entry(id).or_default().extend(std::iter::from_fn(|| peer.poll_applied()));
            }
        }

        /// Ticks every peer `n` times, delivering after each tick.
        fn tick(&mut self, n: usize) {
            for _ in 0..n {
                for peer in self.peers.values_mut() {
                    peer.handle_tick().unwrap();
                }
                self.deliver();
            }
        }

        fn leaders(&self) -> Vec<u64> {
            self.peers.iter().filter(|(_, p)| p.is_leader()).map(|(&id, _)| id).collect()
        }

        fn commands(&self, node: NodeId) -> Vec<Command> {
            self.applied.get(&raft_id(node)).map(|a| a.iter().map(|a| a.command).collect()).unwrap_or_default()
        }
    }

    #[test]
    fn a_committed_remove_dc_gives_every_peer_the_same_epoch() {
        let mut g = Group::new();
        g.peer(NodeId(0)).campaign().unwrap();
        g.deliver();
        assert_eq!(g.leaders(), vec![raft_id(NodeId(0))]);
        assert!(matches!(
            g.peer(NodeId(2)).propose(&Command::RemoveDc(DcId(2))),
            Err(Error::NotLeader { leader: Some(1) })
        ));

        g.peer(NodeId(0)).propose(&Command::RemoveDc(DcId(2))).unwrap();
        g.deliver();
        g.tick(3); // the followers learn the commit index from the next append or heartbeat
        for &n in VOTERS.iter().chain([&LEARNER]) {
            let m = g.peer(n).membership();
            assert_eq!(m.epoch(), Epoch(2), "{n}");
            assert!(m.partitions().all(|(_, r)| r.n() == 2 && r.quorum() == 2), "{n}");
            let applied = &g.applied[&raft_id(n)];
            assert_eq!(applied.len(), 1, "{n}: {applied:?}");
            assert_eq!(applied[0].command, Command::RemoveDc(DcId(2)));
            assert_eq!(applied[0].outcome.as_ref().map(|c| c.epoch), Ok(Epoch(2)));
        }
        // A refused command is committed and refused the same way everywhere.
        g.peer(NodeId(0)).propose(&Command::RemoveDc(DcId(2))).unwrap();
        g.tick(3);
        for &n in VOTERS.iter().chain([&LEARNER]) {
            let last = g.applied[&raft_id(n)].last().unwrap().clone();
            assert_eq!(last.outcome, Err(Refused::DcAlreadyRemoved(DcId(2))), "{n}");
            assert_eq!(g.peer(n).membership().epoch(), Epoch(2));
        }
    }

    #[test]
    fn the_minority_side_cannot_commit() {
        let mut g = Group::new();
        g.peer(NodeId(0)).campaign().unwrap();
        g.deliver();
        // The leader's DC is cut off with a follower-learner on the other side.
        g.isolated.insert(raft_id(NodeId(0)));
        g.peer(NodeId(0)).propose(&Command::RemoveDc(DcId(1))).unwrap();
        // Check-quorum makes the cut-off leader step down at its second quorum check (every
        // 10 ticks; the first still counts the replies from before the cut); the majority side then elects a leader of its own. raft-rs randomizes the
        // election timeouts (thread-local), and the two candidates may split their votes a few
        // times, so the wait is bounded generously; nothing commits on the cut-off side
        // meanwhile.
        g.tick(20);
        assert!(!g.peer(NodeId(0)).is_leader(), "check-quorum makes the cut-off leader step down");
        let mut ticks = 20;
        while g.leaders().is_empty() && ticks < 2_000 {
            g.tick(1);
            ticks += 1;
        }
        assert!(g.commands(NodeId(0)).is_empty(), "the cut-off leader committed alone");
        let leaders = g.leaders();
        assert_eq!(leaders.len(), 1, "after {ticks} ticks: {leaders:?}");
        let leader = node_of(leaders[0]).unwrap();
        assert_ne!(leader, NodeId(0));
        g.peer(leader).propose(&Command::RemoveDc(DcId(0))).unwrap();
        g.tick(3);
        for n in [NodeId(2), NodeId(4), LEARNER] {
            assert_eq!(g.commands(n), vec![Command::RemoveDc(DcId(0))], "{n}");
            assert_eq!(g.peer(n).membership().dc_status(DcId(0)), Some(crate::membership::Status::Removed));
            assert_eq!(g.peer(n).membership().epoch(), Epoch(2));
        }
        // Healed, the old leader drops its uncommitted entry and applies the majority's log.
        g.isolated.clear();
        g.tick(20);
        assert_eq!(g.commands(NodeId(0)), vec![Command::RemoveDc(DcId(0))]);
        let majority = g.peer(NodeId(2)).membership().clone();
        assert_eq!(g.peer(NodeId(0)).membership(), &majority);
        assert_eq!(g.peer(NodeId(0)).membership().dc_status(DcId(1)), Some(crate::membership::Status::Up));
    }

    #[test]
    fn bad_configuration_and_bad_entries_are_refused_without_panics() {
        let m = membership();
        let bad = |node, voters: &[NodeId], learners: &[NodeId]| {
            RaftMembership::new(node, voters, learners, m.clone(), RaftTicks::default()).unwrap_err().to_string()
        };
        assert!(bad(NodeId(0), &[NodeId(0), NodeId(1)], &[]).contains("two voters in dc#0"));
        assert!(bad(NodeId(0), &[NodeId(0)], &[NodeId(0)]).contains("listed twice"));
        assert!(bad(NodeId(0), &[NodeId(9)], &[]).contains("not a member"));
        assert!(bad(NodeId(3), &[NodeId(0)], &[]).contains("neither"));
        let ticks = RaftTicks { election: 2, heartbeat: 2 };
        assert!(RaftMembership::new(NodeId(0), &[NodeId(0)], &[], m.clone(), ticks).is_err());

        // A single-voter group commits alone; an entry that is not a command is skipped.
        let mut solo = RaftMembership::new(NodeId(0), &[NodeId(0)], &[], m, RaftTicks::default()).unwrap();
        solo.campaign().unwrap();
        assert!(solo.is_leader());
        solo.node.propose(Vec::new(), b"not json".to_vec()).unwrap();
        solo.process_ready().unwrap();
        solo.propose(&Command::RemoveNode(NodeId(5))).unwrap();
        assert_eq!(solo.undecodable_entries(), 1);
        let applied = solo.poll_applied().unwrap();
        assert_eq!(applied.command, Command::RemoveNode(NodeId(5)));
        assert_eq!(solo.membership().epoch(), Epoch(1), "node 5 held no replica");
        // A message from outside the group is an error, not a panic.
        let mut stranger = Message::default();
        stranger.set_msg_type(raft::eraftpb::MessageType::MsgHeartbeat);
        stranger.from = 77;
        stranger.to = 1;
        stranger.term = solo.term();
        let _ = solo.handle_message(stranger);
        let mut local = Message::default();
        local.set_msg_type(raft::eraftpb::MessageType::MsgHup);
        assert!(solo.handle_message(local).is_err());
    }
}
