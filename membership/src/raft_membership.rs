//! Membership replicated by Raft across DCs: a thin sans-IO driver of raft-rs's `RawNode`,
//! whose committed log entries are [`Command`]s applied in order to a [`Membership`]
//! (docs/design.md, "Failover"). The log lives either on disk ([`RaftMembership::open`], a
//! [`DiskStorage`] directory) or in memory ([`RaftMembership::new`], raft-rs's `MemStorage`, for
//! tests and simulation).
//!
//! One node per DC is a Raft voter; the other nodes are Raft learners that receive and apply
//! the same log without voting. A Raft peer's id is its node id plus one ([`raft_id`]), since
//! raft-rs reserves id 0.
//!
//! # Voters
//!
//! The voters follow the membership: one voter per live DC (up, with an up node). After each
//! call the leader compares the voter set with the applied membership and, with no conf change
//! pending, proposes the next single-voter conf change ([`plan_conf_step`]; raft-rs's simple
//! `ConfChangeV2`, one at a time):
//! - a committed [`Command::RemoveDc`] (or [`Command::RemoveNode`] of the voter) demotes the
//!   DC's voter to a Raft learner. It stays in the group, so it keeps receiving the log and,
//!   when it comes back, learns that it was removed. The majority is then counted over the
//!   remaining voters: on 4 DCs, after one is removed, 2 live voters of 3 still commit.
//! - a committed [`Command::RestoreDc`] (or [`Command::RestoreNode`]) makes one node of the DC
//!   a voter again, once the leader sees that node holding the committed log. RestoreDc is
//!   the point, not the rebuild's [`Command::Promote`]: the Raft voter holds the membership
//!   log, not partition data, which the learner already has in full (the log is never
//!   compacted); a DC may get no replica back at all and must vote all the same. Raft's
//!   safety does not depend on the new voter's log (single-voter changes are safe one at a
//!   time); waiting until it is caught up only keeps a slow voter out of the majority.
//!
//! The check runs on every leader after every input, and its plan is a function of the applied
//! state, so a leader change between a removal and its conf change is repaired by the next
//! leader. A leader whose own DC is removed hands the leadership to a caught-up voter first
//! (raft-rs does not step a demoted leader down cleanly). Conf changes applied are reported by
//! [`RaftMembership::poll_conf_change`]; [`RaftMembership::voters`] gives the current set.
//!
//! # Use
//!
//! The driver calls [`RaftMembership::handle_tick`] every tick (its own timer; a tick length
//! of about the largest inter-DC RTT suits the defaults), [`RaftMembership::handle_message`]
//! for each Raft message from a peer, and [`RaftMembership::propose`] on the leader; after each
//! call it drains [`RaftMembership::poll_message`] (send each to the peer `msg.to`, e.g. as
//! protobuf bytes over QUIC) and [`RaftMembership::poll_applied`] (each committed command, in
//! log order, with its outcome). Nothing here sleeps or sends; with a [`DiskStorage`] each
//! call writes and fsyncs what raft-rs asks to persist before it returns, and before the
//! messages that depend on it are queued.
//!
//! # Restart
//!
//! [`RaftMembership::open`] reopens a peer from its directory with its term, vote, log, commit
//! index and configuration (the conf state as of its conf index, [`Recovery::conf_index`]).
//! The [`Membership`] itself is not stored: `open` starts from the initial membership and
//! re-applies every committed entry from index 1: those up to the conf index itself (their
//! conf changes are in the stored conf state), the rest through raft-rs (`Config::applied` is
//! the conf index, so the first `Ready` after the restart lists the entries after it up to the
//! commit index as committed, conf changes included). Those commands are reported by
//! [`RaftMembership::poll_applied`] again, so what
//! the driver does with an [`Applied`] must be idempotent or keyed by its index; entries up to
//! [`Recovery::commit`] are the replayed ones, and entries that were applied before the crash
//! but whose commit index was not yet on disk come again later, when the leader's messages
//! bring the commit index.
//!
//! # Limits of this first step
//!
//! - The log is durable but never compacted, so no snapshot is ever sent, and a restart
//!   re-applies the whole log; a snapshot of [`Membership`] comes with the wiring.
//! - The voters follow removals and restorations one conf change at a time (module docs,
//!   "Voters"); the group still needs a majority of its current voters to make each change:
//!   two DCs of four dying at the same instant, before the first is removed, block it (2 of 4).
//!   Nodes are never added to or removed from the Raft group itself: the group is the
//!   topology's nodes, demoted voters stay learners.
//! - raft-rs draws each election timeout from a thread-local random number generator
//!   (`rand::thread_rng`); the timing of elections is therefore not seeded. The outcome of
//!   the tests below does not depend on it; a deterministic simulation pins the timeout with
//!   `RawNode::raft.set_randomized_election_timeout` or calls [`RaftMembership::campaign`].
//! - raft-rs panics on some messages that only a faulty peer would send (e.g. a commit index
//!   beyond the log it was sent); peers are authenticated by the cluster's mutual TLS.
//! - After an error from writing the storage ([`Error::StorageIo`]) the peer is in an unknown
//!   state (raft-rs's `Ready` was not advanced); drop it and reopen it from its directory.

use raft::eraftpb::{
    ConfChange, ConfChangeSingle, ConfChangeType, ConfChangeV2, ConfState, Entry, EntryType, HardState, Message,
    Snapshot,
};
use raft::storage::MemStorage;
use raft::{Config, GetEntriesContext, RaftState, RawNode, StateRole, Storage};
use redt_proto::NodeId;
use std::collections::{BTreeSet, VecDeque};
use std::path::Path;

use crate::error::{Error, Result};
use crate::membership::{Change, Command, Membership, Status};
use crate::raft_log::{DiskStorage, Recovery};
use crate::refused::Refused;

/// Returns the Raft peer id of `node`: its id plus one (raft-rs reserves 0).
pub fn raft_id(node: NodeId) -> u64 {
    u64::from(node.0) + 1
}

/// Encodes a Raft message for the wire (raft-rs's protobuf encoding, `eraftpb::Message`).
pub fn encode_message(message: &Message) -> Vec<u8> {
    // Encoding an in-memory message into a vector cannot fail (no size limit is set).
    protobuf::Message::write_to_bytes(message).unwrap_or_default()
}

/// Decodes a Raft message from the wire.
///
/// # Errors
/// [`Error::MessageCodec`] if `data` is not a protobuf `eraftpb::Message`.
pub fn decode_message(data: &[u8]) -> Result<Message> {
    <Message as protobuf::Message>::parse_from_bytes(data).map_err(|e| Error::MessageCodec(e.to_string()))
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

/// A peer's role in the Raft group after a conf change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// It votes and counts in the majority.
    Voter,
    /// It receives and applies the log without voting.
    Learner,
    /// It left the group (never proposed by this crate: a demoted voter stays a learner).
    Removed,
}

/// One peer's new role, as a conf change names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoleChange {
    /// The peer's Raft id ([`raft_id`] of its node).
    pub raft_id: u64,
    /// Its role after the change.
    pub role: Role,
}

/// One committed Raft conf change and what applying it did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedConfChange {
    /// Its Raft log index.
    pub index: u64,
    /// The role changes it names, in order.
    pub changes: Vec<RoleChange>,
    /// `Ok` if raft-rs applied it, or raft-rs's reason for refusing it (the same on every
    /// peer; the configuration is unchanged then).
    pub outcome: std::result::Result<(), String>,
}

/// Where a peer keeps its Raft log: in memory or in a directory.
enum PeerStorage {
    Memory(MemStorage),
    /// Boxed: a `DiskStorage` is much larger than a `MemStorage` (an `Arc`).
    Disk(Box<DiskStorage>),
}

impl PeerStorage {
    fn append(&mut self, entries: &[Entry]) -> Result<()> {
        match self {
            PeerStorage::Memory(s) => Ok(s.wl().append(entries)?),
            PeerStorage::Disk(s) => s.append(entries),
        }
    }

    fn set_hardstate(&mut self, hs: HardState) -> Result<()> {
        match self {
            PeerStorage::Memory(s) => {
                s.wl().set_hardstate(hs);
                Ok(())
            }
            PeerStorage::Disk(s) => s.set_hardstate(hs),
        }
    }

    fn set_commit(&mut self, commit: u64) -> Result<()> {
        match self {
            PeerStorage::Memory(s) => {
                s.wl().mut_hard_state().set_commit(commit);
                Ok(())
            }
            PeerStorage::Disk(s) => s.set_commit(commit),
        }
    }

    /// Stores the configuration after the conf change at log index `index`.
    fn set_conf_state(&mut self, cs: ConfState, index: u64) -> Result<()> {
        match self {
            PeerStorage::Memory(s) => {
                s.wl().set_conf_state(cs);
                Ok(())
            }
            PeerStorage::Disk(s) => s.set_conf_state(cs, index),
        }
    }
}

impl Storage for PeerStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        match self {
            PeerStorage::Memory(s) => s.initial_state(),
            PeerStorage::Disk(s) => s.initial_state(),
        }
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let max_size = max_size.into();
        match self {
            PeerStorage::Memory(s) => s.entries(low, high, max_size, context),
            PeerStorage::Disk(s) => s.entries(low, high, max_size, context),
        }
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        match self {
            PeerStorage::Memory(s) => s.term(idx),
            PeerStorage::Disk(s) => s.term(idx),
        }
    }

    fn first_index(&self) -> raft::Result<u64> {
        match self {
            PeerStorage::Memory(s) => s.first_index(),
            PeerStorage::Disk(s) => s.first_index(),
        }
    }

    fn last_index(&self) -> raft::Result<u64> {
        match self {
            PeerStorage::Memory(s) => s.last_index(),
            PeerStorage::Disk(s) => s.last_index(),
        }
    }

    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        match self {
            PeerStorage::Memory(s) => s.snapshot(request_index, to),
            PeerStorage::Disk(s) => s.snapshot(request_index, to),
        }
    }
}

/// One peer of the membership Raft group (module docs give the call order).
pub struct RaftMembership {
    node: RawNode<PeerStorage>,
    membership: Membership,
    messages: VecDeque<Message>,
    applied: VecDeque<Applied>,
    conf_changes: VecDeque<AppliedConfChange>,
    undecodable: u64,
}

impl RaftMembership {
    /// Starts the peer on `node` of a fresh group whose voters are `voters` (one node per DC)
    /// and whose learners are `learners`, from the initial `membership` (every peer must start
    /// from the same one). The log lives in memory and is lost with the value: for tests and
    /// simulation; a real node uses [`RaftMembership::open`].
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
        let config = config(node, voters, learners, &membership, ticks)?;
        let conf = ConfState::from((voters.iter().map(|&n| raft_id(n)), learners.iter().map(|&n| raft_id(n))));
        let storage = PeerStorage::Memory(MemStorage::new_with_conf_state(conf));
        Self::start(&config, storage, membership)
    }

    /// Starts the peer on `node` with its Raft log in the directory `dir` (a
    /// [`DiskStorage`]): creates it there on the first start (`dir` missing or empty), and
    /// on a restart reopens it with the term, vote, log and commit index it held. The other
    /// arguments are as for [`RaftMembership::new`] and must be the same on every start.
    ///
    /// Before returning it re-applies every committed entry of the log to `membership`, the
    /// initial membership (Raft state is durable; the membership is rebuilt from it), so
    /// [`RaftMembership::membership`] is the state as of the persisted commit index, and
    /// [`RaftMembership::poll_applied`] reports those commands again (module docs, "Restart").
    /// [`RaftMembership::recovery`] tells what was read back.
    ///
    /// # Errors
    ///
    /// As [`RaftMembership::new`], checked before `dir` is touched; the errors of
    /// [`DiskStorage::open`]: [`Error::ForeignStorage`] if `dir` belongs to another node or
    /// group, [`Error::CorruptStorage`] or [`Error::InconsistentStorage`] if it cannot be
    /// read back, [`Error::StorageIo`]; and [`Error::StorageIo`] if re-applying ends in a
    /// write that fails.
    pub fn open(
        dir: &Path,
        node: NodeId,
        voters: &[NodeId],
        learners: &[NodeId],
        membership: Membership,
        ticks: RaftTicks,
    ) -> Result<Self> {
        let config = config(node, voters, learners, &membership, ticks)?;
        let ids = |nodes: &[NodeId]| nodes.iter().map(|&n| raft_id(n)).collect::<Vec<_>>();
        let storage = DiskStorage::open(dir, config.id, &ids(voters), &ids(learners))?;
        Self::start(&config, PeerStorage::Disk(Box::new(storage)), membership)
    }

    fn start(config: &Config, storage: PeerStorage, mut membership: Membership) -> Result<Self> {
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let mut config = config.clone();
        let mut applied = VecDeque::new();
        let mut undecodable = 0;
        // A reopened log: the stored conf state is the configuration as of its conf index, so
        // raft-rs starts there (`Config::applied`) and the commands up to it are re-applied
        // here, from the log; their conf changes are already in the conf state.
        if let PeerStorage::Disk(s) = &storage {
            let (_, conf_index) = s.conf_state();
            if conf_index > 0 {
                let entries = s.entries(1, conf_index + 1, None, GetEntriesContext::empty(false))?;
                for entry in entries.iter().filter(|e| e.get_entry_type() == EntryType::EntryNormal) {
                    match apply_command(&mut membership, entry) {
                        Some(Ok(a)) => applied.push_back(a),
                        Some(Err(())) => undecodable += 1,
                        None => {}
                    }
                }
            }
            config.applied = conf_index;
        }
        let node = RawNode::new(&config, storage, &logger)?;
        let mut peer = RaftMembership {
            node,
            membership,
            messages: VecDeque::new(),
            applied,
            conf_changes: VecDeque::new(),
            undecodable,
        };
        // raft-rs delivers the committed entries after `Config::applied`.
        peer.process_ready()?;
        Ok(peer)
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

    /// Returns the next committed Raft conf change applied to the group's configuration, in
    /// log order (module docs, "Voters"). A reopened peer reports only those after its stored
    /// conf index.
    pub fn poll_conf_change(&mut self) -> Option<AppliedConfChange> {
        self.conf_changes.pop_front()
    }

    // ---- getters --------------------------------------------------------------------------

    /// Returns the membership as of the last applied command.
    pub fn membership(&self) -> &Membership {
        &self.membership
    }

    /// Returns the nodes that vote in the Raft group as of the last applied conf change, in id
    /// order.
    pub fn voters(&self) -> Vec<NodeId> {
        self.conf_state().voters.iter().filter_map(|&id| node_of(id)).collect()
    }

    /// Returns the Raft learners as of the last applied conf change, in id order.
    pub fn learners(&self) -> Vec<NodeId> {
        self.conf_state().learners.iter().filter_map(|&id| node_of(id)).collect()
    }

    fn conf_state(&self) -> ConfState {
        let mut cs = self.node.raft.prs().conf().to_conf_state();
        cs.voters.sort_unstable();
        cs.learners.sort_unstable();
        cs
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

    /// Returns what [`RaftMembership::open`] read back from the directory (the persisted term
    /// and commit index, the bytes of torn log tail cut off), or `None` for a peer whose log
    /// is in memory.
    pub fn recovery(&self) -> Option<Recovery> {
        match self.node.store() {
            PeerStorage::Memory(_) => None,
            PeerStorage::Disk(s) => Some(s.recovery()),
        }
    }

    /// Returns how many committed entries did not decode as a [`Command`] and were skipped
    /// (the same on every peer: they are the same bytes).
    pub fn undecodable_entries(&self) -> u64 {
        self.undecodable
    }

    // ---- the Ready loop -------------------------------------------------------------------

    /// Handles every pending `Ready`, then, on the leader, takes the next step towards one
    /// voter per live DC ([`plan_conf_step`]) and handles the `Ready` that makes.
    fn process_ready(&mut self) -> Result<()> {
        self.drain_ready()?;
        if self.step_voters() {
            self.drain_ready()?;
        }
        Ok(())
    }

    /// Handles every pending `Ready` in raft-rs's order: send messages, apply a snapshot,
    /// persist new entries and the hard state, apply committed entries, send the messages
    /// that waited for persistence, advance (then persist the new commit index and apply what
    /// it commits). The hard state is persisted before the entries it commits are applied, so
    /// a stored conf index is never beyond the stored commit index.
    fn drain_ready(&mut self) -> Result<()> {
        while self.node.has_ready() {
            let mut ready = self.node.ready();
            self.messages.extend(ready.take_messages());
            if !ready.snapshot().is_empty() {
                return Err(Error::SnapshotUnsupported);
            }
            self.node.mut_store().append(ready.entries())?;
            if let Some(hs) = ready.hs() {
                self.node.mut_store().set_hardstate(hs.clone())?;
            }
            self.apply_entries(ready.take_committed_entries())?;
            self.messages.extend(ready.take_persisted_messages());
            let mut light = self.node.advance(ready);
            if let Some(commit) = light.commit_index() {
                self.node.mut_store().set_commit(commit)?;
            }
            self.messages.extend(light.take_messages());
            self.apply_entries(light.take_committed_entries())?;
            self.node.advance_apply();
        }
        Ok(())
    }

    fn apply_entries(&mut self, entries: Vec<Entry>) -> Result<()> {
        for entry in entries {
            match entry.get_entry_type() {
                EntryType::EntryNormal => match apply_command(&mut self.membership, &entry) {
                    Some(Ok(a)) => self.applied.push_back(a),
                    Some(Err(())) => self.undecodable += 1,
                    None => {}
                },
                EntryType::EntryConfChange | EntryType::EntryConfChangeV2 => self.apply_conf_change(&entry)?,
            }
        }
        Ok(())
    }

    /// Applies one committed conf change entry to raft-rs's configuration and stores the
    /// configuration it gives. One that does not decode or that raft-rs refuses changes
    /// nothing, on every peer alike.
    ///
    /// # Errors
    ///
    /// [`Error::StorageIo`] if storing the configuration fails.
    fn apply_conf_change(&mut self, entry: &Entry) -> Result<()> {
        let decoded = if entry.get_entry_type() == EntryType::EntryConfChange {
            <ConfChange as protobuf::Message>::parse_from_bytes(&entry.data).map(|v1| {
                let mut single = ConfChangeSingle::default();
                single.set_change_type(v1.get_change_type());
                single.node_id = v1.node_id;
                let mut cc = ConfChangeV2::default();
                cc.set_changes(vec![single].into());
                cc
            })
        } else {
            <ConfChangeV2 as protobuf::Message>::parse_from_bytes(&entry.data)
        };
        let Ok(cc) = decoded else {
            self.undecodable += 1;
            return Ok(());
        };
        let changes = cc
            .changes
            .iter()
            .map(|c| RoleChange {
                raft_id: c.node_id,
                role: match c.get_change_type() {
                    ConfChangeType::AddNode => Role::Voter,
                    ConfChangeType::AddLearnerNode => Role::Learner,
                    ConfChangeType::RemoveNode => Role::Removed,
                },
            })
            .collect();
        let outcome = match self.node.apply_conf_change(&cc) {
            Ok(cs) => {
                self.node.mut_store().set_conf_state(cs, entry.index)?;
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        };
        self.conf_changes.push_back(AppliedConfChange { index: entry.index, changes, outcome });
        Ok(())
    }

    /// On the leader with no conf change pending (raft-rs allows one at a time, and counts a
    /// new leader's as pending until its first entry is applied), proposes the next conf
    /// change of [`plan_conf_step`], or asks a voter to take over the leadership. Returns
    /// whether it did something. A proposal raft-rs drops (e.g. during a leadership transfer)
    /// is planned again at the next call: the plan is a function of the applied state.
    fn step_voters(&mut self) -> bool {
        let raft = &self.node.raft;
        if raft.state != StateRole::Leader || raft.has_pending_conf() || raft.lead_transferee.is_some() {
            return false;
        }
        let Some(leader) = node_of(raft.id) else { return false };
        let committed = raft.raft_log.committed;
        let caught_up = |n: NodeId| raft.prs().get(raft_id(n)).is_some_and(|pr| n == leader || pr.matched >= committed);
        let step = plan_conf_step(&self.membership, &self.voters(), &self.learners(), leader, caught_up);
        let (node, change_type) = match step {
            None => return false,
            Some(ConfStep::TransferLeader(to)) => {
                self.node.transfer_leader(raft_id(to));
                return true;
            }
            Some(ConfStep::MakeLearner(n)) => (n, ConfChangeType::AddLearnerNode),
            Some(ConfStep::MakeVoter(n)) => (n, ConfChangeType::AddNode),
        };
        let mut single = ConfChangeSingle::default();
        single.set_change_type(change_type);
        single.node_id = raft_id(node);
        let mut cc = ConfChangeV2::default();
        cc.set_changes(vec![single].into());
        // One change, automatic transition: a simple (not joint) change.
        self.node.propose_conf_change(Vec::new(), cc).is_ok()
    }
}

/// Decodes one normal entry as a [`Command`] and applies it to `membership`: `None` for an
/// empty entry (a new leader's), `Some(Err(()))` for one that does not decode.
fn apply_command(membership: &mut Membership, entry: &Entry) -> Option<std::result::Result<Applied, ()>> {
    if entry.data.is_empty() {
        return None;
    }
    Some(match serde_json::from_slice::<Command>(&entry.data) {
        Ok(command) => {
            let outcome = membership.apply(&command);
            Ok(Applied { index: entry.index, command, outcome })
        }
        Err(_) => Err(()),
    })
}

/// The leader's next step towards one Raft voter per live DC, from [`plan_conf_step`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConfStep {
    /// Demote this voter to a learner (a conf change).
    MakeLearner(NodeId),
    /// Promote this learner to a voter (a conf change).
    MakeVoter(NodeId),
    /// Hand the leadership to this voter: the leader itself is to be demoted, and raft-rs
    /// does not step a demoted leader down cleanly.
    TransferLeader(NodeId),
}

/// Returns the next step that brings the Raft voters towards exactly one voter per live DC
/// of `membership` (a DC that is up with an up node), or `None` if they are there.
///
/// In order: demote a voter whose node or DC is removed, or that is a second voter of its
/// DC (`leader` is the one kept if it is one of the two), unless it is the leader; promote
/// the learner of lowest id on an up node of a live DC without a voter, if `caught_up` says
/// it holds the committed log; hand the leadership to a caught-up kept voter if the leader
/// itself is to be demoted. Demotions come first: each shrinks the majority that the
/// remaining voters must reach, which is what lets a group that lost a second DC commit.
///
/// One step is one voter more or less: raft-rs applies it as a simple conf change, which is
/// safe one at a time (Raft thesis §4.1); the caller proposes the next only after this one is
/// applied.
pub(crate) fn plan_conf_step(
    membership: &Membership,
    voters: &[NodeId],
    learners: &[NodeId],
    leader: NodeId,
    caught_up: impl Fn(NodeId) -> bool,
) -> Option<ConfStep> {
    let mut kept = Vec::new();
    let mut kept_dcs = BTreeSet::new();
    let mut dropped = Vec::new();
    let leader_first =
        voters.iter().copied().filter(|&v| v == leader).chain(voters.iter().copied().filter(|&v| v != leader));
    for v in leader_first {
        match membership.dc_of(v) {
            Some(dc) if membership.is_node_up(v) && kept_dcs.insert(dc) => kept.push(v),
            _ => dropped.push(v),
        }
    }
    if let Some(&v) = dropped.iter().find(|&&v| v != leader) {
        return Some(ConfStep::MakeLearner(v));
    }
    for (dc, _) in membership.dcs().filter(|&(dc, s)| s == Status::Up && !kept_dcs.contains(&dc)) {
        let candidate = learners
            .iter()
            .copied()
            .find(|&n| membership.dc_of(n) == Some(dc) && membership.is_node_up(n) && caught_up(n));
        if let Some(n) = candidate {
            return Some(ConfStep::MakeVoter(n));
        }
    }
    if dropped.contains(&leader) {
        return kept.iter().copied().find(|&v| caught_up(v)).map(ConfStep::TransferLeader);
    }
    None
}

/// Checks the group's peers against the membership and returns the raft-rs configuration of
/// `node`'s peer (errors as [`RaftMembership::new`]).
fn config(
    node: NodeId,
    voters: &[NodeId],
    learners: &[NodeId],
    membership: &Membership,
    ticks: RaftTicks,
) -> Result<Config> {
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
    // `applied` stays 0: the membership is not stored, so a reopened peer re-applies its
    // whole committed log (module docs, "Restart").
    let config = Config {
        id: raft_id(node),
        election_tick: ticks.election,
        heartbeat_tick: ticks.heartbeat,
        check_quorum: true,
        pre_vote: true,
        applied: 0,
        ..Config::default()
    };
    config.validate()?;
    Ok(config)
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
        /// Every command applied, per peer (since its last start).
        applied: BTreeMap<u64, Vec<Applied>>,
        /// The peers' storage directories, `node<id>` under it; `None` for in-memory logs.
        dir: Option<tempfile::TempDir>,
        /// The initial Raft voters, Raft learners and membership every peer starts from.
        voters: Vec<NodeId>,
        learners: Vec<NodeId>,
        initial: Membership,
    }

    const ALL: [NodeId; 4] = [VOTERS[0], VOTERS[1], VOTERS[2], LEARNER];

    impl Group {
        /// The group with in-memory logs.
        fn new() -> Self {
            Self::start(None)
        }

        /// The group with each peer's log in a directory of its own.
        fn on_disk() -> Self {
            Self::start(Some(tempfile::tempdir().unwrap()))
        }

        fn start(dir: Option<tempfile::TempDir>) -> Self {
            Self::start_with(dir, &VOTERS, &[LEARNER], membership())
        }

        /// The group of `voters` and `learners` over `initial`, each log in a directory.
        fn start_with(
            dir: Option<tempfile::TempDir>,
            voters: &[NodeId],
            learners: &[NodeId],
            initial: Membership,
        ) -> Self {
            let mut g = Group {
                peers: BTreeMap::new(),
                isolated: BTreeSet::new(),
                applied: BTreeMap::new(),
                dir,
                voters: voters.to_vec(),
                learners: learners.to_vec(),
                initial,
            };
            for n in voters.iter().chain(learners).copied().collect::<Vec<_>>() {
                let peer = g.open(n).unwrap();
                g.peers.insert(raft_id(n), peer);
            }
            g
        }

        fn dir_of(&self, node: NodeId) -> std::path::PathBuf {
            self.dir.as_ref().expect("a group on disk").path().join(format!("node{}", node.0))
        }

        fn open(&self, node: NodeId) -> Result<RaftMembership> {
            match &self.dir {
                None => {
                    RaftMembership::new(node, &self.voters, &self.learners, self.initial.clone(), RaftTicks::default())
                }
                Some(_) => RaftMembership::open(
                    &self.dir_of(node),
                    node,
                    &self.voters,
                    &self.learners,
                    self.initial.clone(),
                    RaftTicks::default(),
                ),
            }
        }

        /// Stops `node` as a crash would: its state in memory and its unsent messages are lost.
        fn crash(&mut self, node: NodeId) {
            self.peers.remove(&raft_id(node)).unwrap();
            self.applied.remove(&raft_id(node));
        }

        /// Starts `node` again from its directory; what it applies on start is collected.
        fn restart(&mut self, node: NodeId) -> &mut RaftMembership {
            let peer = self.open(node).unwrap();
            self.peers.insert(raft_id(node), peer);
            self.collect_applied();
            self.peer(node)
        }

        fn peer(&mut self, node: NodeId) -> &mut RaftMembership {
            self.peers.get_mut(&raft_id(node)).unwrap()
        }

        /// Ticks until there is exactly one leader; returns it.
        fn elect(&mut self) -> NodeId {
            let mut ticks = 0;
            while self.leaders().len() != 1 {
                assert!(ticks < 2_000, "no single leader after {ticks} ticks: {:?}", self.leaders());
                self.tick(1);
                ticks += 1;
            }
            node_of(self.leaders()[0]).unwrap()
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
        remove_dc_gives_every_peer_the_same_epoch(Group::new());
    }

    #[test]
    fn a_committed_remove_dc_gives_every_peer_the_same_epoch_on_disk() {
        remove_dc_gives_every_peer_the_same_epoch(Group::on_disk());
    }

    fn remove_dc_gives_every_peer_the_same_epoch(mut g: Group) {
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

    fn applied_commands(g: &Group, node: NodeId) -> Vec<(u64, Command)> {
        g.applied.get(&raft_id(node)).map(|a| a.iter().map(|a| (a.index, a.command)).collect()).unwrap_or_default()
    }

    /// Raft Figure 2 (term, vote and log are persistent state) and §5.3: a leader that
    /// crashes comes back from its directory as a follower of its old term with its log and
    /// commit index, rebuilds its membership from the committed entries, and applies what the
    /// new leader committed without it.
    #[test]
    fn a_restarted_leader_rejoins_with_its_term_log_and_membership() {
        let mut g = Group::on_disk();
        g.peer(NodeId(0)).campaign().unwrap();
        g.deliver();
        g.peer(NodeId(0)).propose(&Command::RemoveDc(DcId(2))).unwrap();
        g.peer(NodeId(0)).propose(&Command::RemoveNode(NodeId(3))).unwrap();
        g.tick(3);
        assert_eq!(g.peer(NodeId(0)).voters(), vec![NodeId(0), NodeId(2)], "the removed DC's voter is demoted");
        // Back, DC 2's node votes again; without it, crashing node 0 would leave 1 of 2 voters.
        g.peer(NodeId(0)).propose(&Command::RestoreDc(DcId(2))).unwrap();
        g.tick(3);
        assert_eq!(g.peer(NodeId(0)).voters(), VOTERS);
        let before = g.peer(NodeId(0)).membership().clone();
        let term = g.peer(NodeId(0)).term();
        let applied = applied_commands(&g, NodeId(0));
        assert_eq!(before.epoch(), Epoch(2));
        assert_eq!(applied.len(), 3, "{applied:?}");

        g.crash(NodeId(0));
        let leader = g.elect();
        assert_ne!(leader, NodeId(0));
        let learner_node = NodeId(5);
        g.peer(leader).propose(&Command::AddLearner { partition: PartitionId(0), node: learner_node }).unwrap();
        g.tick(3);
        let majority = g.peer(leader).membership().clone();
        assert_eq!(majority.epoch(), Epoch(3));

        let peer = g.restart(NodeId(0));
        let recovery = peer.recovery().unwrap();
        assert!(!recovery.created);
        assert_eq!(recovery.dropped_tail_bytes, 0);
        assert_eq!(peer.term(), term, "the term is read back");
        assert_eq!(recovery.term, term);
        assert!(!peer.is_leader());
        assert_eq!(peer.membership(), &before, "the membership is rebuilt from the committed log");
        assert_eq!(peer.voters(), VOTERS, "the configuration is read back");
        assert!(recovery.conf_index > 0 && recovery.conf_index <= recovery.commit, "{recovery:?}");
        assert_eq!(applied_commands(&g, NodeId(0)), applied, "replayed once, in order, with their indexes");
        assert!(applied.iter().all(|&(index, _)| index <= recovery.commit));

        g.tick(20);
        assert!(g.peer(NodeId(0)).term() >= term);
        assert_eq!(g.peer(NodeId(0)).membership(), &majority);
        let leader = g.elect();
        g.peer(leader)
            .propose(&Command::Promote { partition: PartitionId(0), node: learner_node, added_in: Epoch(3) })
            .unwrap();
        g.tick(3);
        for n in ALL {
            assert_eq!(g.peer(n).membership().epoch(), Epoch(4), "{n}");
        }
        let commands: Vec<Command> = applied_commands(&g, NodeId(0)).into_iter().map(|(_, c)| c).collect();
        assert_eq!(
            commands,
            vec![
                Command::RemoveDc(DcId(2)),
                Command::RemoveNode(NodeId(3)),
                Command::RestoreDc(DcId(2)),
                Command::AddLearner { partition: PartitionId(0), node: learner_node },
                Command::Promote { partition: PartitionId(0), node: learner_node, added_in: Epoch(3) },
            ],
            "each command applied once since the restart"
        );
    }

    /// The whole group stops at once and starts again from its directories: every peer, the
    /// learner too, comes back with the membership it had, and the group elects a leader in a
    /// later term and commits again.
    #[test]
    fn the_whole_group_restarts_from_its_directories() {
        let mut g = Group::on_disk();
        g.peer(NodeId(2)).campaign().unwrap();
        g.deliver();
        g.peer(NodeId(2)).propose(&Command::RemoveDc(DcId(0))).unwrap();
        g.tick(3);
        let before: Vec<(u64, Membership)> =
            ALL.iter().map(|&n| (g.peer(n).term(), g.peer(n).membership().clone())).collect();
        for n in ALL {
            g.crash(n);
        }
        for (&n, (term, membership)) in ALL.iter().zip(&before) {
            let peer = g.restart(n);
            assert_eq!(peer.term(), *term, "{n}");
            assert_eq!(peer.membership(), membership, "{n}");
            assert_eq!(peer.membership().epoch(), Epoch(2), "{n}");
        }
        let leader = g.elect();
        assert!(g.peer(leader).term() > before[0].0);
        g.peer(leader).propose(&Command::RestoreDc(DcId(0))).unwrap();
        g.tick(3);
        for n in ALL {
            let commands: Vec<Command> = g.commands(n);
            assert_eq!(commands, vec![Command::RemoveDc(DcId(0)), Command::RestoreDc(DcId(0))], "{n}");
        }
    }

    /// A follower that crashed after persisting an entry but before its acknowledgement left
    /// (the only case where a torn tail may be cut: the entry was never acknowledged) reopens
    /// without it and gets it again from the leader.
    #[test]
    fn a_torn_unacknowledged_tail_is_cut_and_fetched_again() {
        let mut g = Group::on_disk();
        g.peer(NodeId(0)).campaign().unwrap();
        g.deliver();
        g.peer(NodeId(0)).propose(&Command::RemoveNode(NodeId(1))).unwrap();
        g.tick(3);
        let follower = NodeId(4);
        let last = g.peer(follower).node.raft.raft_log.last_index();

        g.peer(NodeId(0)).propose(&Command::RemoveDc(DcId(1))).unwrap();
        let batch: Vec<Message> = std::iter::from_fn(|| g.peer(NodeId(0)).poll_message()).collect();
        for m in batch.iter().filter(|m| m.to == raft_id(follower)) {
            g.peer(follower).handle_message(m.clone()).unwrap();
        }
        assert_eq!(g.peer(follower).node.raft.raft_log.last_index(), last + 1, "the entry is on disk");
        g.crash(follower); // with its acknowledgement unsent
        for m in batch.into_iter().filter(|m| m.to != raft_id(follower)) {
            g.peer(node_of(m.to).unwrap()).handle_message(m).unwrap();
        }
        g.deliver();
        let log = g.dir_of(follower).join("raft.log");
        let len = std::fs::metadata(&log).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&log).unwrap().set_len(len - 3).unwrap();

        let peer = g.restart(follower);
        let recovery = peer.recovery().unwrap();
        assert_eq!(recovery.last_index, last);
        assert!(recovery.dropped_tail_bytes > 0);
        assert_eq!(peer.membership().epoch(), Epoch(1), "the cut entry is not applied");
        g.tick(20);
        assert_eq!(g.commands(follower), vec![Command::RemoveNode(NodeId(1)), Command::RemoveDc(DcId(1))]);
        assert_eq!(g.peers[&raft_id(follower)].membership(), g.peers[&raft_id(NodeId(0))].membership());
        assert_eq!(g.peer(follower).membership().epoch(), Epoch(2));
    }

    /// Raft §5.2: each voter votes for at most one candidate per term, which only holds across
    /// a restart if the vote is on disk: a voter that voted for node 0, crashed and restarted
    /// refuses a second candidate in the same term (an in-memory peer would grant it).
    #[test]
    fn a_restarted_voter_does_not_vote_twice_in_a_term() {
        let mut g = Group::on_disk();
        g.peer(NodeId(0)).campaign().unwrap();
        g.deliver();
        let voter = NodeId(2);
        let term = g.peer(voter).term();
        assert_eq!(g.peer(voter).node.raft.vote, raft_id(NodeId(0)));
        g.crash(voter);
        let peer = g.restart(voter);
        assert_eq!((peer.term(), peer.node.raft.vote), (term, raft_id(NodeId(0))));
        let log = &peer.node.raft.raft_log;
        let mut request = Message::default();
        request.set_msg_type(raft::eraftpb::MessageType::MsgRequestVote);
        request.from = raft_id(NodeId(4));
        request.to = raft_id(voter);
        request.term = term;
        request.index = log.last_index();
        request.log_term = log.last_term();
        peer.handle_message(request).unwrap();
        let response = peer.poll_message().unwrap();
        assert_eq!(response.get_msg_type(), raft::eraftpb::MessageType::MsgRequestVoteResponse);
        assert!(response.reject, "a second vote in term {term}");
    }

    #[test]
    fn open_refuses_another_peers_directory_and_checks_peers_first() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("node0");
        let open = |node, voters: &[NodeId], dir: &Path| {
            RaftMembership::open(dir, node, voters, &[LEARNER], membership(), RaftTicks::default())
        };
        drop(open(NodeId(0), &VOTERS, &dir).unwrap());
        let err = open(NodeId(2), &VOTERS, &dir).unwrap_err();
        assert!(matches!(err, Error::ForeignStorage { .. }), "{err}");
        assert!(err.to_string().contains("raft id 1") && err.to_string().contains("raft id 3"), "{err}");
        let err = open(NodeId(0), &VOTERS[..2], &dir).unwrap_err();
        assert!(matches!(err, Error::ForeignStorage { .. }), "{err}");
        // A bad peer list is refused before the directory is created.
        let fresh = tmp.path().join("fresh");
        let err = open(NodeId(0), &[NodeId(0), NodeId(1)], &fresh).unwrap_err();
        assert!(matches!(err, Error::InvalidRaftPeers(_)), "{err}");
        assert!(!fresh.exists());
        assert!(open(NodeId(0), &VOTERS, &dir).unwrap().recovery().is_some());
        assert!(Group::new().peer(NodeId(0)).recovery().is_none());
    }

    /// 4 DCs × 2 nodes (nodes 2d, 2d+1 in DC d), 4 partitions of n = 3; the voters are the
    /// even nodes, the learners the odd ones.
    /// 4 DCs × 2 nodes, 4 partitions of 3 replicas. The replication factor is 1 so that two
    /// DCs can be removed in a row: these tests are about the Raft voters, and with a factor
    /// of 3 the membership refuses a second replica's removal before the first is rebuilt
    /// (`Refused::TooFewVoters`).
    fn four_dcs() -> (Membership, Vec<NodeId>, Vec<NodeId>) {
        let nodes = (0..8).map(|n| (NodeId(n), DcId(n / 2)));
        let partitions =
            (0..4u32).map(|p| (PartitionId(p), (0..3).map(|d| NodeId(2 * ((p as u16 + d) % 4))).collect()));
        let m = Membership::new(Epoch(1), nodes, partitions, 1).unwrap();
        (m, (0..4).map(|d| NodeId(2 * d)).collect(), (0..4).map(|d| NodeId(2 * d + 1)).collect())
    }

    fn four_dc_group_on_disk() -> Group {
        let (m, voters, learners) = four_dcs();
        Group::start_with(Some(tempfile::tempdir().unwrap()), &voters, &learners, m)
    }

    /// Raft §4.2.2 of the thesis (a majority of the *current* configuration): on 4 DCs, DC 1
    /// dies and is removed, which demotes its voter; then DC 2 dies too, and the 2 voters left
    /// of 3 commit its removal — 2 of the 4 initial voters could not. The new configuration
    /// survives a restart of every peer from its directory, and a restored DC votes again.
    #[test]
    fn a_removed_dcs_voter_is_demoted_so_a_second_dead_dc_can_be_removed() {
        let mut g = four_dc_group_on_disk();
        let initial_voters = g.voters.clone();
        g.peer(NodeId(0)).campaign().unwrap();
        g.deliver();
        for n in [NodeId(2), NodeId(3)] {
            g.crash(n); // DC 1 dies
        }
        g.peer(NodeId(0)).propose(&Command::RemoveDc(DcId(1))).unwrap();
        g.tick(3);
        for n in [0, 1, 4, 5, 6, 7].map(NodeId) {
            assert_eq!(g.peer(n).voters(), [0, 4, 6].map(NodeId), "{n}");
            assert!(g.peer(n).learners().contains(&NodeId(2)), "{n}: demoted, not removed");
        }
        let changes: Vec<AppliedConfChange> = std::iter::from_fn(|| g.peer(NodeId(6)).poll_conf_change()).collect();
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].changes, vec![RoleChange { raft_id: raft_id(NodeId(2)), role: Role::Learner }]);
        assert_eq!(changes[0].outcome, Ok(()));

        for n in [NodeId(4), NodeId(5)] {
            g.crash(n); // DC 2 dies
        }
        let alive_voters: Vec<NodeId> =
            g.peer(NodeId(0)).voters().into_iter().filter(|v| g.peers.contains_key(&raft_id(*v))).collect();
        assert_eq!(alive_voters, [NodeId(0), NodeId(6)]);
        assert!(alive_voters.len() < raft::majority(initial_voters.len()), "2 of the 4 initial voters are no majority");
        assert!(alive_voters.len() >= raft::majority(g.peer(NodeId(0)).voters().len()), "2 of 3 are");
        g.peer(NodeId(0)).propose(&Command::RemoveDc(DcId(2))).unwrap();
        g.tick(3);
        for n in [0, 1, 6, 7].map(NodeId) {
            assert_eq!(g.commands(n), vec![Command::RemoveDc(DcId(1)), Command::RemoveDc(DcId(2))], "{n}");
            assert_eq!(g.peer(n).voters(), [0, 6].map(NodeId), "{n}");
        }
        let majority = g.peer(NodeId(0)).membership().clone();

        // Every live peer restarts from its directory with the current configuration.
        for n in [0, 1, 6, 7].map(NodeId) {
            g.crash(n);
        }
        for n in [0, 1, 6, 7].map(NodeId) {
            let peer = g.restart(n);
            assert_eq!(peer.voters(), [0, 6].map(NodeId), "{n}");
            assert_eq!(peer.learners(), [1, 2, 3, 4, 5, 7].map(NodeId), "{n}");
            assert_eq!(peer.membership(), &majority, "{n}");
            let recovery = peer.recovery().unwrap();
            assert!(recovery.conf_index > 0 && recovery.conf_index <= recovery.commit, "{n}: {recovery:?}");
        }
        let leader = g.elect();
        assert!([NodeId(0), NodeId(6)].contains(&leader));

        // DC 1 comes back: it restarts as a voter of its old configuration, learns from the
        // leader that it was removed and demoted, and votes again once restored.
        g.restart(NodeId(2));
        g.restart(NodeId(3));
        g.tick(5);
        assert_eq!(g.peer(NodeId(2)).membership().dc_status(DcId(1)), Some(Status::Removed));
        assert_eq!(g.peer(NodeId(2)).voters(), [0, 6].map(NodeId));
        let leader = g.elect();
        g.peer(leader).propose(&Command::RestoreDc(DcId(1))).unwrap();
        g.tick(5);
        for n in [0, 1, 2, 3, 6, 7].map(NodeId) {
            assert_eq!(g.peer(n).voters(), [0, 2, 6].map(NodeId), "{n}");
            assert_eq!(g.peer(n).membership().dc_status(DcId(1)), Some(Status::Up), "{n}");
        }
        // The restored voter counts: with it, the group commits without node 6.
        g.crash(NodeId(6));
        g.crash(NodeId(7));
        let leader = g.elect();
        g.peer(leader).propose(&Command::RemoveNode(NodeId(3))).unwrap();
        g.tick(3);
        assert_eq!(g.peer(NodeId(2)).membership().node_status(NodeId(3)), Some(Status::Removed));
    }

    /// The contrast: without a conf change (both DCs die before either is removed), 2 of 4
    /// voters elect no leader and commit nothing.
    #[test]
    fn two_of_four_voters_commit_nothing() {
        let mut g = four_dc_group_on_disk();
        g.peer(NodeId(0)).campaign().unwrap();
        g.deliver();
        for n in [2, 3, 4, 5].map(NodeId) {
            g.crash(n);
        }
        g.peer(NodeId(0)).propose(&Command::RemoveDc(DcId(1))).unwrap();
        g.tick(100);
        assert!(g.leaders().is_empty(), "check-quorum steps the leader down");
        for n in [0, 1, 6, 7].map(NodeId) {
            assert!(g.commands(n).is_empty(), "{n}");
            assert_eq!(g.peer(n).voters().len(), 4);
        }
    }

    /// A leader that crashes between applying a removal and getting its conf change out:
    /// the next leader sees the voter set and the membership disagree and proposes the
    /// demotion itself (handing the leadership over first if it is the voter to demote).
    #[test]
    fn a_new_leader_finishes_a_demotion_its_predecessor_did_not_get_out() {
        let mut g = Group::on_disk();
        g.peer(NodeId(0)).campaign().unwrap();
        g.deliver();
        g.peer(NodeId(0)).propose(&Command::RemoveDc(DcId(1))).unwrap();
        while g.peer(NodeId(0)).membership().dc_status(DcId(1)) == Some(Status::Up) {
            let mut batch = Vec::new();
            for peer in g.peers.values_mut() {
                batch.extend(std::iter::from_fn(|| peer.poll_message()));
            }
            assert!(!batch.is_empty(), "the removal commits");
            for m in batch {
                g.peer(node_of(m.to).unwrap()).handle_message(m).unwrap();
            }
        }
        assert!(g.peer(NodeId(0)).node.raft.has_pending_conf(), "the leader proposed the demotion");
        g.crash(NodeId(0)); // with the conf change entry unsent
        let mut ticks = 0;
        while g.peer(NodeId(4)).voters() != [NodeId(0), NodeId(4)] {
            assert!(ticks < 2_000, "no demotion after {ticks} ticks");
            g.tick(1);
            ticks += 1;
        }
        assert_eq!(g.peer(NodeId(2)).voters(), [NodeId(0), NodeId(4)], "the demoted peer learns it");
        assert!(!g.peer(NodeId(2)).is_leader());
        g.restart(NodeId(0));
        g.tick(20);
        assert_eq!(g.peer(NodeId(0)).voters(), [NodeId(0), NodeId(4)]);
        assert_eq!(g.commands(NodeId(0)), vec![Command::RemoveDc(DcId(1))]);
    }

    #[test]
    fn the_plan_keeps_one_voter_per_live_dc_one_step_at_a_time() {
        let (mut m, voters, learners) = four_dcs();
        let all = |_| true;
        let plan = |m: &Membership, v: &[NodeId], l: &[NodeId], leader, up: &dyn Fn(NodeId) -> bool| {
            plan_conf_step(m, v, l, NodeId(leader), up)
        };
        assert_eq!(plan(&m, &voters, &learners, 0, &all), None);
        m.apply(&Command::RemoveNode(NodeId(4))).unwrap();
        assert_eq!(plan(&m, &voters, &learners, 0, &all), Some(ConfStep::MakeLearner(NodeId(4))));
        let v = [0, 2, 6].map(NodeId);
        let l = [1, 3, 4, 5, 7].map(NodeId);
        assert_eq!(plan(&m, &v, &l, 0, &all), Some(ConfStep::MakeVoter(NodeId(5))), "DC 2's other node");
        assert_eq!(plan(&m, &v, &l, 0, &|n| n != NodeId(5)), None, "not before it has the log");
        // Two voters in one DC: the one that is not the leader goes.
        assert_eq!(plan(&m, &[0, 1, 2, 6].map(NodeId), &l, 1, &all), Some(ConfStep::MakeLearner(NodeId(0))));
        // The leader's own DC removed: it hands the leadership to a caught-up voter.
        m.apply(&Command::RemoveDc(DcId(0))).unwrap();
        let v = [0, 2, 5, 6].map(NodeId);
        let l = [1, 3, 4, 7].map(NodeId);
        assert_eq!(plan(&m, &v, &l, 0, &|n| n != NodeId(2)), Some(ConfStep::TransferLeader(NodeId(5))));
        assert_eq!(plan(&m, &v, &l, 2, &all), Some(ConfStep::MakeLearner(NodeId(0))));
    }
}
