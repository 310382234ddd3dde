//! What became of a transaction whose client lost the answer ("ask, don't resubmit
//! blindly"): the findings of a read-only lookup in every DC's rings and decision logs, the rule
//! that judges them, and what a client does with the judgement.
//!
//! Sans-IO like [`crate::recovery`]: [`judge`] and [`next_step`] are pure functions. The node's
//! driver (`Node::outcome_query`) asks one node of every DC for its [`Finding`]s
//! ([`crate::executor_core::ExecutorCore::lookup_txn`]) and judges them; it never fences,
//! promises or recovers anything, so asking cannot change what happens to the transaction.
//!
//! # The rule
//!
//! A lookup cannot see ballots being chosen, so it says "aborted" only when commit can be ruled
//! out for good, never from one replica's abort:
//!
//! 1. a commit applied anywhere (an entry or a decision-log row `Committed`): **committed**;
//! 2. before the transaction's phase-1 deadline has passed by the clock-skew bound on the
//!    asking node's clock, a replica may still vote: never "aborted";
//! 3. a commit — by the coordinator (`Q` up-to-date commit votes) or by a recoverer
//!    ([`crate::recovery`], rule 5: `M = floor(n/2) + 1` commit votes) — needs at least `M`
//!    commit votes in every touched partition, all cast before the deadline. After it, a
//!    replica can still be part of a commit only if its node cannot be seen (no answer, a
//!    decision log that evicted its row, a node that holds no voting replica now), or it holds
//!    an entry that voted commit (finished or not: an up-to-date replica whose DC a commit left
//!    behind for another partition aborts its own redo, docs/design.md §2, and was still one of the
//!    `M`), or an unfinished entry that has not voted. If some touched partition has
//!    fewer than `M` such replicas: **aborted** (the transaction did not and will not happen).
//!    When no entry of the transaction is found anywhere its partitions are not known, and the
//!    rule must hold for every partition of every placement the node keeps: the transaction
//!    never ran and can no longer run;
//! 4. otherwise **undecided** if some entry of it is found (a recoverer will decide it), else
//!    **unknown**.

use redt_proto::wire::TxnFindingMsg;
use redt_proto::{majority, Cts, Epoch, NodeId, Outcome, PartitionId, Placement, Topology, TxnId};
use std::collections::BTreeMap;

/// What one node's ring and decision log hold of a transaction ([`crate::executor_core::
/// ExecutorCore::lookup_txn`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The node.
    pub node: NodeId,
    /// What was found.
    pub kind: FindingKind,
}

/// The kinds of [`Finding`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FindingKind {
    /// No entry, and the node's decision log proves none was ever released: the node's
    /// replicas never voted on the transaction (so far).
    Nothing,
    /// Entries or decision-log rows of the transaction.
    Found(Found),
    /// No entry, and the decision log cannot prove there was none (rows as late as the
    /// transaction were evicted, its start is not known, or the ring could not be read).
    CannotTell,
    /// The node holds no voting replica now (removed, or back and being rebuilt): nothing it
    /// holds from before is trusted (docs/design.md, "Failover": a returning DC).
    Untrusted,
}

/// What a node's entries and rows of a transaction say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// A commit was applied here, at this commit timestamp.
    pub committed: Option<Cts>,
    /// Some entry or row of it voted commit.
    pub commit_vote: bool,
    /// Some phase-1 entry of it is unfinished (`Intent` or `Logged`).
    pub unfinished: bool,
    /// Some unfinished entry has not voted yet.
    pub unvoted: bool,
    /// A finished entry's decision-log row could not be found (evicted): it may have been a
    /// commit.
    pub forgotten: bool,
    /// What an entry of it records: its start, epoch and partitions.
    pub entry: Option<EntryFacts>,
}

/// What every phase-1 entry of a transaction records about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryFacts {
    /// The coordinator's start timestamp.
    pub start: Cts,
    /// The placement epoch it was planned in.
    pub epoch: Epoch,
    /// Every partition it touches.
    pub partitions: Vec<PartitionId>,
}

/// What a lookup finds of a transaction ([`judge`]): what became of it, as far as the rings
/// and decision logs can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutcomeLookup {
    /// A commit was applied, at this commit timestamp.
    Committed(Cts),
    /// It did not commit and never will (rule 3 of the module docs); why.
    Aborted(String),
    /// Entries of it wait for a decision; which.
    Undecided(String),
    /// Nothing conclusive can be seen; why.
    Unknown(String),
}

impl OutcomeLookup {
    /// What a client can be told from it: committed, aborted, or (undecided or nothing
    /// conclusive) unknown.
    pub fn outcome(&self) -> Outcome {
        match self {
            OutcomeLookup::Committed(_) => Outcome::Committed,
            OutcomeLookup::Aborted(_) => Outcome::Aborted,
            OutcomeLookup::Undecided(_) | OutcomeLookup::Unknown(_) => Outcome::Unknown,
        }
    }

    /// Whether it is final (committed or aborted).
    pub fn is_final(&self) -> bool {
        self.outcome() != Outcome::Unknown
    }

    /// Encodes the state for [`redt_proto::wire::TxnOutcomeReply`]: `(state, cts, detail)`.
    pub fn to_wire(&self) -> (u32, u64, String) {
        match self {
            OutcomeLookup::Committed(cts) => (0, cts.0, String::new()),
            OutcomeLookup::Aborted(why) => (1, 0, why.clone()),
            OutcomeLookup::Undecided(why) => (2, 0, why.clone()),
            OutcomeLookup::Unknown(why) => (3, 0, why.clone()),
        }
    }

    /// Decodes [`OutcomeLookup::to_wire`]'s encoding.
    ///
    /// # Errors
    /// An unknown state code (named in the text).
    pub fn from_wire(state: u32, cts: u64, detail: String) -> Result<OutcomeLookup, String> {
        Ok(match state {
            0 => OutcomeLookup::Committed(Cts::new(cts)),
            1 => OutcomeLookup::Aborted(detail),
            2 => OutcomeLookup::Undecided(detail),
            3 => OutcomeLookup::Unknown(detail),
            other => return Err(format!("unknown outcome state {other}")),
        })
    }
}

impl Finding {
    /// Encodes it for [`redt_proto::wire::TxnFoundReply`].
    pub fn to_wire(&self) -> TxnFindingMsg {
        let mut m = TxnFindingMsg { node: u32::from(self.node.0), ..Default::default() };
        match &self.kind {
            FindingKind::Nothing => m.kind = 0,
            FindingKind::CannotTell => m.kind = 2,
            FindingKind::Untrusted => m.kind = 3,
            FindingKind::Found(f) => {
                m.kind = 1;
                m.committed_cts = f.committed.map_or(0, |c| c.0);
                m.commit_vote = f.commit_vote;
                m.unfinished = f.unfinished;
                m.unvoted = f.unvoted;
                m.forgotten = f.forgotten;
                if let Some(e) = &f.entry {
                    m.start = Some(e.start.0);
                    m.epoch = e.epoch.0;
                    m.partitions = e.partitions.iter().map(|p| p.0).collect();
                }
            }
        }
        m
    }

    /// Decodes [`Finding::to_wire`]'s encoding.
    ///
    /// # Errors
    /// A node id or kind out of range (named in the text).
    pub fn from_wire(m: &TxnFindingMsg) -> Result<Finding, String> {
        let node = u16::try_from(m.node).map(NodeId).map_err(|_| format!("finding node {} out of range", m.node))?;
        let kind = match m.kind {
            0 => FindingKind::Nothing,
            2 => FindingKind::CannotTell,
            3 => FindingKind::Untrusted,
            1 => FindingKind::Found(Found {
                committed: (m.committed_cts != 0).then(|| Cts::new(m.committed_cts)),
                commit_vote: m.commit_vote,
                unfinished: m.unfinished,
                unvoted: m.unvoted,
                forgotten: m.forgotten,
                entry: m.start.map(|s| EntryFacts {
                    start: Cts::new(s),
                    epoch: Epoch(m.epoch),
                    partitions: m.partitions.iter().copied().map(PartitionId).collect(),
                }),
            }),
            other => return Err(format!("unknown finding kind {other}")),
        };
        Ok(Finding { node, kind })
    }
}

/// What the asking node knows besides the findings.
#[derive(Clone, Debug)]
pub struct Deadline {
    /// The latest phase-1 deadline the transaction can have, in ms since the HLC origin
    /// (`redt_dc_executor::ORIGIN_UNIX_MS`), when no entry of it is found: the reservation's
    /// `start_after` plus how long it was valid plus the phase-1 timeout. `None`: not known.
    pub latest_ms: Option<u64>,
    /// The phase-1 timeout (every node of a cluster runs with the same).
    pub phase1_timeout_ms: u64,
    /// The clock-skew bound (likewise).
    pub clock_skew_bound_ms: u64,
    /// The asking node's clock, in ms since the HLC origin.
    pub now_ms: u64,
}

/// Judges `findings` (one per node that answered; a node without one could not be asked) of
/// `txn` by the rule of the module docs, with the placements the asking node keeps
/// (`placements`, any order).
pub fn judge(txn: TxnId, findings: &[Finding], placements: &[Placement], deadline: &Deadline) -> OutcomeLookup {
    let by_node: BTreeMap<NodeId, &FindingKind> = findings.iter().map(|f| (f.node, &f.kind)).collect();
    let found = || by_node.iter().filter_map(|(&n, k)| if let FindingKind::Found(f) = k { Some((n, f)) } else { None });
    // Rule 1.
    if let Some(cts) = found().find_map(|(_, f)| f.committed) {
        return OutcomeLookup::Committed(cts);
    }
    let facts = found().find_map(|(_, f)| f.entry.clone());
    // Nodes named as the topology file names them; names do not change with epochs.
    let name = |n: NodeId| placements.iter().max_by_key(|t| t.epoch).map_or_else(|| n.to_string(), |t| t.node_name(n));
    let waiting: Vec<String> = found().filter(|(_, f)| f.unfinished).map(|(n, _)| name(n)).collect();
    let not_final = || {
        if waiting.is_empty() {
            OutcomeLookup::Unknown(format!("{txn}: no decision visible and commit is not ruled out"))
        } else {
            OutcomeLookup::Undecided(format!("{txn}: entries wait for a decision on {}", waiting.join(", ")))
        }
    };
    // Rule 2.
    let deadline_ms = match &facts {
        Some(f) => Some((f.start.0 >> redt_dc_executor::LOGICAL_BITS) + deadline.phase1_timeout_ms),
        None => deadline.latest_ms,
    };
    let Some(deadline_ms) = deadline_ms else { return not_final() };
    if deadline.now_ms <= deadline_ms + deadline.clock_skew_bound_ms {
        return not_final();
    }
    // Rule 3: which replicas can still be one of a commit's `M` commit votes.
    let may_commit = |n: &NodeId| match by_node.get(n) {
        None | Some(FindingKind::CannotTell | FindingKind::Untrusted) => true,
        Some(FindingKind::Nothing) => false,
        Some(FindingKind::Found(f)) => f.forgotten || f.commit_vote || (f.unfinished && f.unvoted),
    };
    let short = |topology: &Topology, p: PartitionId| -> Option<String> {
        let part = topology.partitions.get(p.0 as usize)?;
        let n = part.replicas.len();
        let can = part.replicas.iter().filter(|r| may_commit(r)).count();
        (can < majority(n)).then(|| {
            format!("{p} has {can} of {n} replicas that can still count for a commit (a commit needs {})", majority(n))
        })
    };
    match &facts {
        Some(f) => {
            let Some(topology) = placements.iter().find(|t| t.epoch == f.epoch) else { return not_final() };
            match f.partitions.iter().find_map(|&p| short(topology, p)) {
                Some(why) => OutcomeLookup::Aborted(format!("{txn} can never commit: {why}")),
                None => not_final(),
            }
        }
        None => {
            let every = placements.iter().all(|t| t.partitions.iter().all(|p| short(t, p.id).is_some()));
            if every && !placements.is_empty() {
                OutcomeLookup::Aborted(format!(
                    "{txn} never ran and can no longer run: no entry of it anywhere past its phase-1 deadline"
                ))
            } else {
                not_final()
            }
        }
    }
}

/// What a client does with a lookup of a transaction whose answer was lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NextStep {
    /// Report it committed (its reads are not available: they were in the lost answer).
    ReportCommitted,
    /// Submit the call again, under a new id, on a live coordinator: the transaction did not
    /// happen, so running the call again cannot run it twice.
    Resubmit,
    /// Report it aborted (a resubmission was already made; it is not resubmitted again).
    ReportAborted,
    /// Report its outcome unknown, with its id: never resubmitted.
    ReportUnknown,
}

/// The client's decision table for a lost answer: `lookup` is the outcome query's last lookup
/// (after its bounded wait), `resubmitted` whether the call was already submitted again once.
pub fn next_step(lookup: &OutcomeLookup, resubmitted: bool) -> NextStep {
    match lookup {
        OutcomeLookup::Committed(_) => NextStep::ReportCommitted,
        OutcomeLookup::Aborted(_) if !resubmitted => NextStep::Resubmit,
        OutcomeLookup::Aborted(_) => NextStep::ReportAborted,
        OutcomeLookup::Undecided(_) | OutcomeLookup::Unknown(_) => NextStep::ReportUnknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology() -> Placement {
        Placement::from(
            Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("default is valid"),
        )
    }

    /// The replicas of partition 0 (n = 3, M = 2) and every other node.
    fn p0(t: &Topology) -> (Vec<NodeId>, Vec<NodeId>) {
        let r = t.partitions[0].replicas.clone();
        let others = t.nodes.iter().map(|n| n.id).filter(|n| !r.contains(n)).collect();
        (r, others)
    }

    fn facts(t: &Topology) -> EntryFacts {
        EntryFacts {
            start: Cts(1000 << redt_dc_executor::LOGICAL_BITS),
            epoch: t.epoch,
            partitions: vec![PartitionId(0)],
        }
    }

    fn found(node: NodeId, f: Found) -> Finding {
        Finding { node, kind: FindingKind::Found(f) }
    }

    fn nothing(node: NodeId) -> Finding {
        Finding { node, kind: FindingKind::Nothing }
    }

    /// Past the deadline of an entry started at 1000 ms (timeout 2000, skew 250).
    fn late() -> Deadline {
        Deadline { latest_ms: None, phase1_timeout_ms: 2000, clock_skew_bound_ms: 250, now_ms: 3251 }
    }

    const T: TxnId = TxnId(77);

    #[test]
    fn a_commit_applied_anywhere_is_committed() {
        let t = topology();
        let (r, _) = p0(&t);
        let f = vec![found(r[0], Found { committed: Some(Cts(5)), ..Default::default() })];
        let early = Deadline { now_ms: 0, ..late() };
        assert_eq!(judge(T, &f, &[t], &early), OutcomeLookup::Committed(Cts(5)));
    }

    #[test]
    fn before_the_deadline_nothing_is_aborted() {
        let t = topology();
        let (r, others) = p0(&t);
        let aborted = Found { entry: Some(facts(&t)), ..Default::default() };
        let mut f: Vec<Finding> = r.iter().map(|&n| found(n, aborted.clone())).collect();
        f.extend(others.iter().map(|&n| nothing(n)));
        let at_deadline = Deadline { now_ms: 3250, ..late() };
        assert!(matches!(judge(T, &f, std::slice::from_ref(&t), &at_deadline), OutcomeLookup::Unknown(_)));
        assert!(matches!(judge(T, &f, &[t], &late()), OutcomeLookup::Aborted(_)));
    }

    #[test]
    fn an_abort_over_a_commit_vote_at_one_replica_is_no_proof() {
        // docs/design.md §2: a replica left behind by a commit aborts its own redo. One such
        // replica, the other two not seen (their DCs did not answer): commit is still
        // possible.
        let t = topology();
        let (r, _) = p0(&t);
        let left_behind = Found { commit_vote: true, entry: Some(facts(&t)), ..Default::default() };
        let f = vec![found(r[0], left_behind.clone())];
        assert!(matches!(judge(T, &f, std::slice::from_ref(&t), &late()), OutcomeLookup::Unknown(_)));
        // Two of three aborted their redo over a commit vote: still no proof. Both may have
        // been up-to-date votes of a commit whose DCs were behind for another partition (a
        // DC that left any written partition behind aborts all its redo, and is caught up).
        let f = vec![found(r[0], left_behind.clone()), found(r[1], left_behind.clone())];
        assert!(matches!(judge(T, &f, std::slice::from_ref(&t), &late()), OutcomeLookup::Unknown(_)));
        // Only one commit vote among three seen replicas: fewer than M = 2 can count for one.
        let abort = Found { entry: Some(facts(&t)), ..Default::default() };
        let f = vec![found(r[0], left_behind), found(r[1], abort.clone()), found(r[2], abort)];
        assert!(matches!(judge(T, &f, &[t], &late()), OutcomeLookup::Aborted(_)));
    }

    #[test]
    fn unfinished_commit_votes_are_undecided() {
        let t = topology();
        let (r, _) = p0(&t);
        let waiting = Found { commit_vote: true, unfinished: true, entry: Some(facts(&t)), ..Default::default() };
        let f: Vec<Finding> = r.iter().map(|&n| found(n, waiting.clone())).collect();
        let OutcomeLookup::Undecided(why) = judge(T, &f, std::slice::from_ref(&t), &late()) else {
            panic!("undecided expected")
        };
        // The client's text names the nodes as the topology file does.
        let names: Vec<String> = r.iter().map(|&n| t.node_name(n)).collect();
        assert!(why.ends_with(&format!("entries wait for a decision on {}", names.join(", "))), "{why}");
        assert!(!why.contains("node#"), "{why}");
        // An unvoted entry may still vote commit; an abort vote cannot.
        let unvoted = Found { unfinished: true, unvoted: true, entry: Some(facts(&t)), ..Default::default() };
        let abort = Found { unfinished: true, entry: Some(facts(&t)), ..Default::default() };
        let f = vec![found(r[0], waiting), found(r[1], unvoted), found(r[2], abort.clone())];
        assert!(matches!(judge(T, &f, std::slice::from_ref(&t), &late()), OutcomeLookup::Undecided(_)));
        let f = vec![found(r[0], abort.clone()), found(r[1], abort), nothing(r[2])];
        assert!(matches!(judge(T, &f, &[t], &late()), OutcomeLookup::Aborted(_)));
    }

    #[test]
    fn a_forgotten_row_or_an_untrusted_node_may_have_committed() {
        let t = topology();
        let (r, _) = p0(&t);
        let forgotten = Found { forgotten: true, entry: Some(facts(&t)), ..Default::default() };
        let done = Found { entry: Some(facts(&t)), ..Default::default() };
        let f = vec![
            found(r[0], forgotten),
            found(r[1], done.clone()),
            Finding { node: r[2], kind: FindingKind::Untrusted },
        ];
        assert!(matches!(judge(T, &f, std::slice::from_ref(&t), &late()), OutcomeLookup::Unknown(_)));
        let f =
            vec![found(r[0], done.clone()), found(r[1], done), Finding { node: r[2], kind: FindingKind::CannotTell }];
        assert!(matches!(judge(T, &f, &[t], &late()), OutcomeLookup::Aborted(_)));
    }

    #[test]
    fn never_ran_needs_every_node_seen_and_the_latest_deadline_past() {
        let t = topology();
        let all: Vec<Finding> = t.nodes.iter().map(|n| nothing(n.id)).collect();
        let no_bound = late();
        assert!(
            matches!(judge(T, &all, std::slice::from_ref(&t), &no_bound), OutcomeLookup::Unknown(_)),
            "no start known"
        );
        let bound = Deadline { latest_ms: Some(5000), ..late() };
        assert!(
            matches!(judge(T, &all, std::slice::from_ref(&t), &bound), OutcomeLookup::Unknown(_)),
            "deadline not past"
        );
        let past = Deadline { latest_ms: Some(5000), now_ms: 5251, ..late() };
        assert!(matches!(judge(T, &all, std::slice::from_ref(&t), &past), OutcomeLookup::Aborted(_)));
        // One DC silent (n = 3, at most one replica per DC): still fewer than M anywhere.
        let dc1: Vec<NodeId> = t.dcs[1].nodes.clone();
        let some: Vec<Finding> = all.iter().filter(|f| !dc1.contains(&f.node)).cloned().collect();
        assert!(matches!(judge(T, &some, std::slice::from_ref(&t), &past), OutcomeLookup::Aborted(_)));
        // Two DCs silent: a partition with replicas in both could have committed there.
        let dc2: Vec<NodeId> = t.dcs[2].nodes.clone();
        let fewer: Vec<Finding> = some.iter().filter(|f| !dc2.contains(&f.node)).cloned().collect();
        assert!(matches!(judge(T, &fewer, &[t], &past), OutcomeLookup::Unknown(_)));
    }

    /// The client's decision table: only a final abort resubmits, once.
    #[test]
    fn the_client_resubmits_only_a_transaction_that_did_not_happen() {
        let rows = [
            (OutcomeLookup::Committed(Cts(3)), false, NextStep::ReportCommitted),
            (OutcomeLookup::Committed(Cts(3)), true, NextStep::ReportCommitted),
            (OutcomeLookup::Aborted("x".into()), false, NextStep::Resubmit),
            (OutcomeLookup::Aborted("x".into()), true, NextStep::ReportAborted),
            (OutcomeLookup::Undecided("x".into()), false, NextStep::ReportUnknown),
            (OutcomeLookup::Undecided("x".into()), true, NextStep::ReportUnknown),
            (OutcomeLookup::Unknown("x".into()), false, NextStep::ReportUnknown),
            (OutcomeLookup::Unknown("x".into()), true, NextStep::ReportUnknown),
        ];
        for (lookup, resubmitted, step) in rows {
            assert_eq!(next_step(&lookup, resubmitted), step, "{lookup:?}, resubmitted: {resubmitted}");
            let told = match step {
                NextStep::ReportCommitted => Outcome::Committed,
                NextStep::Resubmit | NextStep::ReportAborted => Outcome::Aborted,
                NextStep::ReportUnknown => Outcome::Unknown,
            };
            assert_eq!((lookup.outcome(), lookup.is_final()), (told, told != Outcome::Unknown), "{lookup:?}");
        }
    }

    #[test]
    fn findings_survive_the_wire_and_bad_ones_are_refused() {
        let t = topology();
        let all = [
            nothing(NodeId(1)),
            Finding { node: NodeId(2), kind: FindingKind::CannotTell },
            Finding { node: NodeId(3), kind: FindingKind::Untrusted },
            found(
                NodeId(4),
                Found {
                    committed: Some(Cts(8)),
                    commit_vote: true,
                    unfinished: true,
                    unvoted: true,
                    forgotten: true,
                    entry: Some(facts(&t)),
                },
            ),
            found(NodeId(5), Found::default()),
        ];
        for f in all {
            assert_eq!(Finding::from_wire(&f.to_wire()), Ok(f));
        }
        let far = TxnFindingMsg { node: 1 << 20, ..Default::default() };
        assert!(Finding::from_wire(&far).unwrap_err().contains("out of range"));
        let odd = TxnFindingMsg { kind: 9, ..Default::default() };
        assert!(Finding::from_wire(&odd).unwrap_err().contains("kind 9"));
    }

    #[test]
    fn the_wire_state_round_trips_and_bad_codes_are_refused() {
        for o in [
            OutcomeLookup::Committed(Cts(9)),
            OutcomeLookup::Aborted("a".into()),
            OutcomeLookup::Undecided("u".into()),
            OutcomeLookup::Unknown("k".into()),
        ] {
            let (s, c, d) = o.to_wire();
            assert_eq!(OutcomeLookup::from_wire(s, c, d), Ok(o));
        }
        assert!(OutcomeLookup::from_wire(4, 0, String::new()).unwrap_err().contains("state 4"));
    }
}
