//! Failover driven by the real parts ([`FailoverMode::Policy`]): each node's failure detector
//! (`redt_membership::Detector`, its heartbeats on the simulated wire) and suspect view, and
//! the Raft leader's failover policy (`redt_protocol::failover::Failover`), whose questions to
//! the voters and probes travel as messages too. Only Raft itself is abstracted: the voters are
//! the first node of each DC the membership has up, the leader is the lowest-numbered live
//! voter that reaches a majority of them, and its proposal commits (the membership applies it
//! and every node adopts the new placement 0.1 to 0.5 s later) if it still leads then.
//!
//! Checked here: a removal commits only for a suspect that was down (every node of a DC, or the
//! node: crashed, or restarted) within [`JUSTIFIED_WITHIN`] before it, or cut off from a
//! majority of the voters' DCs ([`Violation::UnjustifiedRemoval`]): what the confirmation rule
//! promises.

use super::{Ev, Msg, World};
use crate::net::Micros;
use crate::violation::Violation;
use redt_membership::{Action as DetectorAction, Command, Detector, Status};
use redt_proto::{majority, DcId, Epoch, NodeId, PartitionId};
use redt_protocol::detector_timeouts::DetectorTimeouts;
use redt_protocol::failover::{Failover, FailoverAction, LeaderView, Probe, Suspect};
use redt_protocol::suspect_view::SuspectView;
use std::collections::BTreeSet;
use std::time::Duration;

/// Who removes and restores DCs and nodes in a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailoverMode {
    /// The simulator, right after a kill (detection, confirmation and the Raft commit taken
    /// as a delay), and at a return.
    Oracle,
    /// Each node's real failure detector and the leader's real failover policy, over the
    /// simulated network (module docs).
    #[default]
    Policy,
}

/// A removal is justified when its suspect was down, or cut off from a majority of the voters,
/// at most this long before the removal commits: detection, the confirmation round and the
/// commit take well under it.
pub(super) const JUSTIFIED_WITHIN: Micros = 3_000_000;

/// A failover-policy message on the simulated wire.
#[derive(Clone, Debug)]
pub(super) enum PolicyMsg {
    /// The leader, in its incarnation `inc`, asks a voter whether it suspects `suspect` (a
    /// restarted leader numbers its rounds from 1 again).
    Ask { inc: u64, round: u64, suspect: Suspect },
    /// The voter's answer, naming the leader's incarnation and round.
    Answer { inc: u64, round: u64, suspects: bool },
    /// The leader probes a node (probe `id`).
    ProbeAsk { id: u64 },
    /// The node answers, with the learners' copies it has filled.
    ProbeAnswer { id: u64, filled: Vec<(PartitionId, Epoch)> },
}

/// The failure-detector and policy state of one simulated node (a process's: a restart starts
/// it afresh).
pub(super) struct NodeFailover {
    pub detector: Detector<NodeId>,
    pub view: SuspectView,
    pub policy: Failover,
}

/// The leader's questions and probes under way.
#[derive(Default)]
pub(super) struct Rounds {
    /// Per (leader, its incarnation, round): the voters not heard from yet.
    pub asks: std::collections::BTreeMap<(NodeId, u64, u64), BTreeSet<NodeId>>,
    /// Per probe id: the leader, its incarnation, the probe.
    pub probes: std::collections::BTreeMap<u64, (NodeId, u64, Probe)>,
    pub next_probe: u64,
    /// When each node was last down, µs: its last crash, or the restart that ended it.
    pub last_down: Vec<Option<Micros>>,
}

impl World {
    /// The length of the leader's tick: the largest inter-DC RTT, between 20 ms and 500 ms (as
    /// a real node ticks its Raft peer).
    pub(super) fn policy_tick(&self) -> Micros {
        let rtt = self.topology.links.iter().flatten().map(|l| l.rtt).max().unwrap_or_default();
        rtt.clamp(Duration::from_millis(20), Duration::from_millis(500)).as_micros() as u64
    }

    /// A fresh detector, suspect view and policy for node `i` at the current time (at the start
    /// and at each restart), and its first detector timer.
    pub(super) fn start_failover(&mut self, i: usize) {
        if self.cfg.failover != FailoverMode::Policy {
            return;
        }
        let timeouts = DetectorTimeouts::defaults(&self.topology);
        let me = self.nodes[i].id;
        let my_dc = self.nodes[i].dc;
        let mut detector = Detector::new();
        for peer in self.topology.nodes.iter().filter(|n| n.id != me) {
            if let Some(config) = timeouts.between(my_dc, peer.dc) {
                detector.add_peer(peer.id, config, self.now);
            }
        }
        let view = SuspectView::new(&self.topology, me);
        let policy = Failover::new(self.now);
        #[cfg(feature = "mutants")]
        let policy = policy.with_mutations(self.cfg.failover_mutations);
        let due = detector.poll_timeout();
        self.nodes[i].failover = Some(NodeFailover { detector, view, policy });
        if let Some(at) = due {
            let inc = self.nodes[i].inc;
            self.queue.push(at.max(self.now), Ev::DetectorTimer { node: me, inc });
        }
    }

    /// Node `node`'s detector timer: ticks it, sends the heartbeats it asks for, updates the
    /// suspect view, and arms the next timer.
    pub(super) fn detector_timer(&mut self, node: NodeId, inc: u64) {
        let i = node.0 as usize;
        if !self.nodes[i].alive || self.nodes[i].inc != inc {
            return;
        }
        let now = self.now;
        let Some(f) = self.nodes[i].failover.as_mut() else { return };
        f.detector.handle_tick(now);
        let mut beats = Vec::new();
        while let Some(action) = f.detector.poll_action() {
            match action {
                DetectorAction::Heartbeat { to, sent_at_us } => beats.push((to, sent_at_us)),
                DetectorAction::Suspect(peer) => {
                    f.view.handle_suspect(peer, now);
                }
                DetectorAction::Alive(peer) => {
                    f.view.handle_alive(peer, now);
                }
            }
        }
        let due = f.detector.poll_timeout();
        for (to, sent_at_us) in beats {
            self.send(node, to, Msg::Heartbeat { from: node, sent_at_us });
        }
        if let Some(at) = due {
            self.queue.push(at.max(now + 1), Ev::DetectorTimer { node, inc });
        }
    }

    /// Node `i` heard from `from` (any message counts as a heartbeat).
    pub(super) fn heard(&mut self, i: usize, from: NodeId, sent_at_us: Option<u64>) {
        let now = self.now;
        if let Some(f) = self.nodes[i].failover.as_mut() {
            f.detector.handle_heartbeat(from, sent_at_us, now);
        }
    }

    /// The Raft voters the abstraction assumes: the first node of each DC the membership has
    /// up.
    fn voters(&self) -> Vec<NodeId> {
        self.topology
            .dcs
            .iter()
            .filter(|d| self.membership.dc_status(d.id) == Some(Status::Up))
            .filter_map(|d| d.nodes.first().copied())
            .collect()
    }

    /// Whether the nodes of DCs `a` and `b` can reach each other now.
    fn linked(&self, a: DcId, b: DcId) -> bool {
        a == b || !(self.net.wan.is_partitioned(a, b) || self.net.wan.is_partitioned(b, a))
    }

    /// The leader now: the lowest-numbered live voter that reaches a majority of the voters.
    fn leader(&self) -> Option<NodeId> {
        let voters = self.voters();
        voters.iter().copied().find(|&l| {
            let n = &self.nodes[l.0 as usize];
            n.alive
                && voters
                    .iter()
                    .filter(|v| {
                        let m = &self.nodes[v.0 as usize];
                        m.alive && self.linked(n.dc, m.dc)
                    })
                    .count()
                    >= majority(voters.len())
        })
    }

    /// One tick of the leader's policy.
    pub(super) fn leader_tick(&mut self) {
        let next = self.now + self.policy_tick();
        self.queue.push(next, Ev::LeaderTick);
        let Some(leader) = self.leader() else { return };
        let i = leader.0 as usize;
        let voters = self.voters();
        let now = self.now;
        let Some(f) = self.nodes[i].failover.as_mut() else { return };
        let (dcs, nodes) = (f.view.suspected_dcs(), f.view.suspected_nodes());
        let view = LeaderView {
            me: leader,
            topology: &self.topology,
            membership: &self.membership,
            voters: &voters,
            suspected_dcs: &dcs,
            suspected_nodes: &nodes,
        };
        let actions = f.policy.tick(now, true, &view);
        self.carry_out(leader, actions);
    }

    /// Carries out what `leader`'s policy decided.
    fn carry_out(&mut self, leader: NodeId, actions: Vec<FailoverAction>) {
        let inc = self.nodes[leader.0 as usize].inc;
        let wait = 4 * self.policy_tick();
        for action in actions {
            match action {
                FailoverAction::AskVoters { round, suspect, voters } => {
                    self.trace(|| format!("{leader} asks the voters about {suspect} (round {round})"));
                    self.rounds.asks.insert((leader, inc, round), voters.iter().copied().collect());
                    for v in voters {
                        self.send(
                            leader,
                            v,
                            Msg::Policy { from: leader, body: PolicyMsg::Ask { inc, round, suspect } },
                        );
                    }
                    self.queue.push(self.now + wait, Ev::AskTimeout { leader, inc, round });
                }
                FailoverAction::Remove(suspect) => {
                    self.trace(|| format!("{leader}: a majority of the voters suspect {suspect}: remove it"));
                    self.commit(leader, suspect.removal());
                }
                FailoverAction::Deferred { suspect, why } => {
                    self.report.removals_refused += 1;
                    self.trace(|| format!("{leader}: removal of {suspect} deferred: {why}"));
                }
                FailoverAction::Probe(list) => {
                    for probe in list {
                        let id = self.rounds.next_probe;
                        self.rounds.next_probe += 1;
                        let asked = match &probe {
                            Probe::RestoreDc { nodes, .. } => nodes.clone(),
                            Probe::RestoreNode(node) => vec![*node],
                            Probe::Promote { node, .. } => vec![*node],
                        };
                        self.rounds.probes.insert(id, (leader, inc, probe));
                        for node in asked {
                            self.send(leader, node, Msg::Policy { from: leader, body: PolicyMsg::ProbeAsk { id } });
                        }
                        self.queue.push(self.now + wait, Ev::ProbeTimeout { id });
                    }
                }
                FailoverAction::Propose(command) => self.commit(leader, command),
            }
        }
    }

    /// `leader`'s proposal of `command`, committed if it still leads: the membership applies
    /// it and every node adopts the new placement.
    fn commit(&mut self, leader: NodeId, command: Command) {
        if self.leader() != Some(leader) {
            self.trace(|| format!("{leader} no longer leads: {command:?} not committed"));
            return;
        }
        if let Command::RemoveDc(_) | Command::RemoveNode(_) = command {
            self.check_justified(command);
        }
        match self.membership.apply(&command) {
            Ok(_) => {
                self.trace(|| format!("membership: {command:?}"));
                match command {
                    Command::RemoveDc(_) => self.report.dcs_removed += 1,
                    Command::RemoveNode(_) => self.report.nodes_removed += 1,
                    Command::Promote { .. } => self.report.replicas_rebuilt += 1,
                    _ => {}
                }
                self.commit_placement();
            }
            Err(e) => {
                if let Command::RemoveDc(_) | Command::RemoveNode(_) = command {
                    self.report.removals_refused += 1;
                }
                self.trace(|| format!("membership refuses {command:?}: {e}"));
            }
        }
    }

    /// Records a violation when the removal `command` is not justified (module docs).
    fn check_justified(&mut self, command: Command) {
        let suspects: Vec<NodeId> = match command {
            Command::RemoveDc(dc) => self.topology.dcs[dc.0 as usize].nodes.clone(),
            Command::RemoveNode(node) => vec![node],
            _ => return,
        };
        let now = self.now;
        let down = suspects.iter().all(|n| {
            let node = &self.nodes[n.0 as usize];
            !node.alive
                || self.rounds.last_down[n.0 as usize].is_some_and(|t| now.saturating_sub(t) <= JUSTIFIED_WITHIN)
        });
        let dc = self.nodes[suspects[0].0 as usize].dc;
        let voters = self.voters();
        let cut_off =
            voters.iter().filter(|v| !self.linked(dc, self.nodes[v.0 as usize].dc)).count() >= majority(voters.len());
        if !down && !cut_off {
            self.report.violations.push(Violation::UnjustifiedRemoval { command: format!("{command:?}"), at_us: now });
        }
    }

    /// Notes that node `i` is down now (a crash, a kill), or was until now (a restart).
    pub(super) fn note_down(&mut self, i: usize) {
        if let Some(t) = self.rounds.last_down.get_mut(i) {
            *t = Some(self.now);
        }
    }

    /// A failover-policy message `body` from `from` arrives at node `to` (alive).
    pub(super) fn deliver_policy(&mut self, to: NodeId, from: NodeId, body: PolicyMsg) {
        let i = to.0 as usize;
        match body {
            PolicyMsg::Ask { inc, round, suspect } => {
                let Some(f) = self.nodes[i].failover.as_ref() else { return };
                let suspects = match suspect {
                    Suspect::Dc(dc) => f.view.suspected_dcs().contains(&dc),
                    Suspect::Node(node) => f.view.suspected_nodes().contains(&node),
                };
                self.send(to, from, Msg::Policy { from: to, body: PolicyMsg::Answer { inc, round, suspects } });
            }
            PolicyMsg::Answer { inc, round, suspects } => {
                if inc != self.nodes[i].inc {
                    return;
                }
                let Some(pending) = self.rounds.asks.get_mut(&(to, inc, round)) else { return };
                if !pending.remove(&from) {
                    return;
                }
                self.answer(to, round, from, suspects);
            }
            PolicyMsg::ProbeAsk { id } => {
                let filled = self.nodes[i].filled.iter().copied().collect();
                self.send(to, from, Msg::Policy { from: to, body: PolicyMsg::ProbeAnswer { id, filled } });
            }
            PolicyMsg::ProbeAnswer { id, filled } => {
                let inc = self.nodes[i].inc;
                if !self.rounds.probes.get(&id).is_some_and(|(l, li, _)| *l == to && *li == inc) {
                    return;
                }
                let Some((_, _, probe)) = self.rounds.probes.remove(&id) else { return };
                let found = match probe {
                    Probe::Promote { partition, added_in, .. } => {
                        filled.contains(&(partition, added_in)).then(|| probe.command())
                    }
                    _ => Some(probe.command()),
                };
                self.probed(to, found);
            }
        }
    }

    /// Hands a voter's answer to `leader`'s policy.
    fn answer(&mut self, leader: NodeId, round: u64, voter: NodeId, suspects: bool) {
        let voters = self.voters();
        let Some(f) = self.nodes[leader.0 as usize].failover.as_mut() else { return };
        let actions = f.policy.answer(round, voter, suspects, &self.membership, &voters);
        self.carry_out(leader, actions);
    }

    /// Hands a probe's finding to `leader`'s policy.
    fn probed(&mut self, leader: NodeId, found: Option<Command>) {
        let leads = self.leader() == Some(leader);
        let Some(f) = self.nodes[leader.0 as usize].failover.as_mut() else { return };
        let actions = f.policy.probed(found, leads);
        self.carry_out(leader, actions);
    }

    /// A round's voters not heard from in time count as not suspecting.
    pub(super) fn ask_timeout(&mut self, leader: NodeId, inc: u64, round: u64) {
        let Some(pending) = self.rounds.asks.remove(&(leader, inc, round)) else { return };
        if !self.nodes[leader.0 as usize].alive || self.nodes[leader.0 as usize].inc != inc {
            return;
        }
        for voter in pending {
            self.answer(leader, round, voter, false);
        }
    }

    /// A probe nobody answered in time found nothing.
    pub(super) fn probe_timeout(&mut self, id: u64) {
        let Some((leader, inc, _)) = self.rounds.probes.remove(&id) else { return };
        if self.nodes[leader.0 as usize].alive && self.nodes[leader.0 as usize].inc == inc {
            self.probed(leader, None);
        }
    }
}
