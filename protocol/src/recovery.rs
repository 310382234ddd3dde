//! The recoverer's decision rule: what a node that takes over an undecided transaction decides
//! from the replies to its `PREPARE(b)` (docs/design.md §2 and "Recovery": its
//! NB variant). Not the RedT paper's §5.1.1 rule, which can reverse an acknowledged
//! outcome (the module `tests` shows its counterexample).
//!
//! Sans-IO like [`crate::decision`]: [`recover`] is a pure function of the replies collected so
//! far. The recoverer's driver (prepare, record at a majority, then apply) is built on it.
//!
//! The rule, per touched partition with `n` replicas, `Q = ceil(3n/4)` ([`quorum`]) and
//! `M = floor(n/2) + 1` ([`majority`]); `L_p` is the set of replicas that answered the prepare
//! (each promised the ballot and, if it had not voted, was fenced to abort), `U_p = n - |L_p|`,
//! and `C_p` the up-to-date commit votes in `L_p`:
//!
//! 1. a replica whose entry is finished (the decision was applied there) gives the decision:
//!    nothing is applied before it is chosen; an applied commit wins over an applied abort,
//!    which may be only a left-behind DC aborting its own redo (docs/design.md §2, catch-up);
//! 2. no replica holds a commit record, and some partition has more than `n - M` replicas in
//!    `L_p` that voted abort or hold an abort record: abort at once, without waiting for a
//!    majority and without recording it first. Those replicas meet every majority of the
//!    partition, and what they hold stays: a vote never changes once cast, and a record is
//!    only replaced at a higher ballot by a recoverer that, meeting one of them, decides abort
//!    too (but see docs/design.md, "Known gaps": a replica a recovered commit leaves behind
//!    loses its commit record when it aborts its own entry). So no commit was or will ever
//!    be chosen: O commits with `Q >= M` commit votes, and a recoverer with `M` commit votes
//!    and no record seen (rule 5), which fewer than `M` replicas can give. This decides a transaction whose epoch's replicas were removed for
//!    good (their promises never come). Otherwise, some partition has `|L_p| < M`: block (a
//!    majority is needed to see any chosen record);
//! 3. a recorded decision in `L`: the one with the highest ballot wins over every vote;
//! 4. some partition has `C_p + U_p < Q`: abort (commit is impossible);
//! 5. every partition has `C_p >= M`: commit, at [`commit_cts`] of the up-to-date votes;
//! 6. otherwise block: the original coordinator may have acknowledged either outcome.
//!
//! The caller then records the decision at a majority of every partition (at its ballot) and
//! only then applies it, releases locks or answers anyone; a decision of rule 1 (already
//! applied) or rule 2 (no commit can ever be chosen) is applied without a record.

use crate::decision::{commit_cts, majority, quorum, PartitionVotes, ReplicaVote};
use redt_dc_executor::Decision;
use redt_proto::{Ballot, Cts};

/// A decision recorded in a replica's vote word, with the ballot it was recorded at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The ballot of the record (0: the original coordinator's abort record).
    pub ballot: Ballot,
    /// The decision; a recorded commit carries its commit timestamp, `None` when the word that
    /// holds it was torn by a recorder that died mid-record (another replica has it).
    pub decision: RecordedDecision,
}

/// The decision part of a [`Recorded`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordedDecision {
    /// Commit, at this commit timestamp if it could be read.
    Commit(Option<Cts>),
    /// Abort.
    Abort,
}

/// One replica's answer to `PREPARE(b)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrepareReply {
    /// No answer (dead, cut off, or it had promised a higher ballot).
    Unreachable,
    /// The replica promised `b`. `vote` is its phase-1 vote ([`ReplicaVote::Abort`] also when
    /// the prepare fenced it before it voted); `record` its recorded decision, if any.
    Prepared {
        /// The phase-1 vote (never [`ReplicaVote::Missing`]).
        vote: ReplicaVote,
        /// The decision recorded in its vote word.
        record: Option<Recorded>,
    },
    /// The replica's entry is finished: the decision was applied there.
    Applied(Decision),
}

/// What the recoverer does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Record this decision at a majority of every partition, then apply it (apply it at once
    /// for [`Why::Applied`] and [`Why::AbortVotes`]).
    Decide {
        /// The decision.
        decision: Decision,
        /// Which rule gave it.
        why: Why,
    },
    /// No decision can be made safely yet: keep the locks, report, retry later.
    Block {
        /// Index (into the partitions given) of every partition that lacks what the rule
        /// needs: a majority of answers, or `M` up-to-date commit votes while commit is still
        /// possible.
        partitions: Vec<usize>,
    },
}

/// The rule that produced a [`Recovery::Decide`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// A replica already applied it (rule 1).
    Applied,
    /// The highest-ballot record (rule 3).
    Record(Ballot),
    /// Some partition's abort votes and abort records meet every majority and no commit record
    /// is seen (rule 2): no commit was or will ever be chosen, so the abort is applied without
    /// a record.
    AbortVotes,
    /// Some partition can no longer reach `Q` (rule 4).
    CommitImpossible,
    /// Every partition has a majority of up-to-date commit votes (rule 5).
    Votes,
}

/// Decides from the prepare replies of every touched partition, one [`PrepareReply`] per
/// replica in placement order (docs/design.md §2 and "Recovery", the NB variant). See the
/// module docs for the rule.
///
/// A recorded commit whose commit timestamp is unreadable everywhere it is seen was never
/// applied (every apply follows a completed record round, which leaves readable copies at a
/// majority); its timestamp is then chosen afresh, above every commit vote seen.
///
/// # Panics
/// If `partitions` is empty or a partition has no replica (the planner never does that).
pub fn recover(partitions: &[Vec<PrepareReply>]) -> Recovery {
    rule(partitions, AbortVotes::AboveMajority)
}

/// When abort votes alone decide (rule 2): the rule's threshold, or one of the deliberate
/// bugs the tests catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AbortVotes {
    /// More than `n - M` abort votes or records in some partition abort (the rule).
    AboveMajority,
    /// More than `n - Q` (a bug: a recoverer may have committed with `M < Q` commit votes).
    AboveQuorum,
    /// Never before a majority answered (a bug: a partition whose replicas were removed for
    /// good never has one again).
    Never,
}

/// The rule of [`recover`], with rule 2's abort threshold given.
fn rule(partitions: &[Vec<PrepareReply>], early: AbortVotes) -> Recovery {
    assert!(!partitions.is_empty(), "a transaction touches at least one partition");
    // Rule 1: an applied decision was chosen. An applied commit wins over an applied abort:
    // a DC that a commit left behind (its vote stale, or missing) aborts its own redo and is
    // caught up, so its entry shows an abort applied over a commit vote, while no replica
    // ever applies a commit of a transaction that aborted (sim-20dc seed 2008: a recoverer
    // that took the behind DC's abort for the decision aborted the redo of up-to-date DCs
    // whose phase 2 was lost, after the commit was applied elsewhere).
    let applied = partitions.iter().flatten().filter_map(|r| match r {
        PrepareReply::Applied(d) => Some(*d),
        _ => None,
    });
    if let Some(d) = applied.clone().find(|d| matches!(d, Decision::Commit(_))).or_else(|| applied.clone().next()) {
        return Recovery::Decide { decision: d, why: Why::Applied };
    }
    // Rule 2: abort votes and abort records that meet every majority rule out every commit;
    // else a majority of every partition must answer.
    let most_abort_votes = |n: usize| match early {
        AbortVotes::AboveMajority => Some(n.saturating_sub(majority(n))),
        AbortVotes::AboveQuorum => Some(n.saturating_sub(quorum(n))),
        AbortVotes::Never => None,
    };
    let commit_recorded = partitions.iter().flatten().any(|r| {
        matches!(r, PrepareReply::Prepared { record: Some(Recorded { decision: RecordedDecision::Commit(_), .. }), .. })
    });
    if !commit_recorded
        && partitions.iter().any(|p| most_abort_votes(p.len()).is_some_and(|most| holding_abort(p) > most))
    {
        return Recovery::Decide { decision: Decision::Abort, why: Why::AbortVotes };
    }
    let short: Vec<usize> = partitions
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            assert!(!p.is_empty(), "a partition has at least one replica");
            answered(p) < majority(p.len())
        })
        .map(|(i, _)| i)
        .collect();
    if !short.is_empty() {
        return Recovery::Block { partitions: short };
    }
    let votes: Vec<PartitionVotes> = partitions.iter().map(|p| votes_of(p)).collect();
    // Rule 3: the highest-ballot record wins.
    let top = partitions
        .iter()
        .flatten()
        .filter_map(|r| match r {
            PrepareReply::Prepared { record: Some(rec), .. } => Some(*rec),
            _ => None,
        })
        .max_by_key(|r| r.ballot);
    if let Some(top) = top {
        let decision = match top.decision {
            RecordedDecision::Abort => Decision::Abort,
            RecordedDecision::Commit(Some(cts)) => Decision::Commit(cts),
            RecordedDecision::Commit(None) => {
                let copy = partitions.iter().flatten().find_map(|r| match r {
                    PrepareReply::Prepared {
                        record: Some(Recorded { ballot, decision: RecordedDecision::Commit(Some(cts)) }),
                        ..
                    } if *ballot == top.ballot => Some(*cts),
                    _ => None,
                });
                Decision::Commit(copy.unwrap_or_else(|| cts_above_every_commit_vote(&votes)))
            }
        };
        return Recovery::Decide { decision, why: Why::Record(top.ballot) };
    }
    // Rule 4: commit impossible.
    for p in &votes {
        let t = p.tally();
        if t.up_to_date + t.missing < quorum(p.n()) {
            return Recovery::Decide { decision: Decision::Abort, why: Why::CommitImpossible };
        }
    }
    // Rule 5: a majority of up-to-date commit votes everywhere.
    let lacking: Vec<usize> =
        votes.iter().enumerate().filter(|(_, p)| p.tally().up_to_date < majority(p.n())).map(|(i, _)| i).collect();
    if lacking.is_empty() {
        let cts = commit_cts(&votes).expect("every partition has at least one up-to-date vote");
        return Recovery::Decide { decision: Decision::Commit(cts), why: Why::Votes };
    }
    // Rule 6.
    Recovery::Block { partitions: lacking }
}

/// The RedT paper's §5.1.1 rule, kept only as a deliberate bug for the tests (it reverses
/// acknowledged outcomes; docs/design.md, "Recovery"): per partition, wait while more than a
/// quarter of the replicas are unreachable, else commit when more than half voted commit (at
/// [`commit_cts`] of those votes), abort otherwise; records and applied decisions ignored.
pub fn papers_rule(partitions: &[Vec<PrepareReply>]) -> Recovery {
    let mut all_commit = true;
    for (i, p) in partitions.iter().enumerate() {
        let dead = p.iter().filter(|r| matches!(r, PrepareReply::Unreachable)).count();
        if 4 * dead > p.len() {
            return Recovery::Block { partitions: vec![i] };
        }
        let commits =
            p.iter().filter(|r| matches!(r, PrepareReply::Prepared { vote: ReplicaVote::Commit { .. }, .. })).count();
        all_commit &= 2 * commits > p.len();
    }
    let votes: Vec<PartitionVotes> = partitions.iter().map(|p| votes_of(p)).collect();
    match commit_cts(&votes) {
        Some(cts) if all_commit => Recovery::Decide { decision: Decision::Commit(cts), why: Why::Votes },
        _ => Recovery::Decide { decision: Decision::Abort, why: Why::Votes },
    }
}

/// [`recover`] with rules 3 and 5 swapped, kept only as a deliberate bug for the tests: a
/// majority of up-to-date commit votes everywhere commits even over a higher-ballot abort
/// record.
pub fn votes_beat_records(partitions: &[Vec<PrepareReply>]) -> Recovery {
    let stripped: Vec<Vec<PrepareReply>> = partitions
        .iter()
        .map(|p| {
            p.iter()
                .map(|r| match r {
                    PrepareReply::Prepared { vote, .. } => PrepareReply::Prepared { vote: vote.clone(), record: None },
                    other => other.clone(),
                })
                .collect()
        })
        .collect();
    match recover(&stripped) {
        d @ Recovery::Decide { why: Why::Votes, .. } => d,
        _ => recover(partitions),
    }
}

/// [`recover`] with rule 2's threshold taken from the coordinator's quorum instead of the
/// majority, kept only as a deliberate bug for the tests: more than `n - Q` abort votes or
/// records abort at once, although a recoverer may have committed with `M < Q` commit votes
/// (rule 5).
pub fn abort_votes_against_quorum(partitions: &[Vec<PrepareReply>]) -> Recovery {
    rule(partitions, AbortVotes::AboveQuorum)
}

/// [`recover`] without rule 2's abort from abort votes and records alone, kept only as a
/// deliberate bug for the tests: a recoverer short of a majority waits, also for replicas
/// removed for good that never answer again (sim seed 2131, churn, default.yaml, `--failover policy --faults
/// all,remove,remove-node`).
pub fn abort_votes_need_a_majority(partitions: &[Vec<PrepareReply>]) -> Recovery {
    rule(partitions, AbortVotes::Never)
}

/// Replicas among the answers of one partition that voted abort (or were fenced before they
/// voted) or hold an abort record.
fn holding_abort(p: &[PrepareReply]) -> usize {
    p.iter()
        .filter(|r| match r {
            PrepareReply::Prepared { vote: ReplicaVote::Abort, .. } => true,
            PrepareReply::Prepared { record: Some(rec), .. } => rec.decision == RecordedDecision::Abort,
            _ => false,
        })
        .count()
}

/// Replicas that answered the prepare.
fn answered(p: &[PrepareReply]) -> usize {
    p.iter().filter(|r| !matches!(r, PrepareReply::Unreachable)).count()
}

/// The votes of one partition as the coordinator's rule sees them: unreachable replicas are
/// missing.
fn votes_of(p: &[PrepareReply]) -> PartitionVotes {
    PartitionVotes::new(
        p.iter()
            .map(|r| match r {
                PrepareReply::Prepared { vote, .. } => vote.clone(),
                PrepareReply::Unreachable | PrepareReply::Applied(_) => ReplicaVote::Missing,
            })
            .collect(),
    )
}

/// One above every timestamp any commit vote carries (its `hlc` and every version).
fn cts_above_every_commit_vote(votes: &[PartitionVotes]) -> Cts {
    let max = votes
        .iter()
        .flat_map(|p| &p.replicas)
        .filter_map(|v| match v {
            ReplicaVote::Commit { versions, hlc } => {
                Some(versions.iter().map(|(_, v)| v.cts().0).fold(hlc.0, u64::max))
            }
            _ => None,
        })
        .max()
        .unwrap_or(0);
    Cts(max.saturating_add(1).min(Cts::MASK))
}

#[cfg(test)]
mod tests;
