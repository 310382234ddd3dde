//! Exhaustive checks of the recoverer's rule over small clusters (docs/design.md,
//! "Recovery": its safety properties and the NB variant's tolerance), and the
//! counterexample that rules out the RedT paper's §5.1.1 rule.

use super::*;
use crate::decision::ItemKey;
use redt_dc_executor::CellVersion;

/// A commit vote on one item at version (1, 100), from replica `k` (its executor clock reads
/// `100 + k`, so the commit timestamp depends on which votes are seen).
fn c(k: u64) -> ReplicaVote {
    ReplicaVote::Commit { versions: vec![(ItemKey::new(0, 0), CellVersion::new(1, Cts(100)))], hlc: Cts(100 + k) }
}

fn prepared(vote: ReplicaVote, record: Option<Recorded>) -> PrepareReply {
    PrepareReply::Prepared { vote, record }
}

/// What the original coordinator O did before it died.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Original {
    /// Nothing visible: no record, nothing applied.
    Nothing,
    /// Committed (every partition had `Q` commit votes), acknowledged, and applied at the
    /// replicas marked "touched".
    AckedCommit,
    /// Recorded abort at the touched replicas (a majority of every partition: acknowledged;
    /// fewer somewhere: not acknowledged).
    RecordedAbort,
}

/// One replica in a scenario.
#[derive(Clone, Copy, Debug)]
struct Replica {
    commit: bool,
    reachable: bool,
    touched: bool,
}

/// Every replica assignment for `sizes` (replicas per partition), as bit patterns.
fn scenarios(sizes: &[usize]) -> impl Iterator<Item = Vec<Vec<Replica>>> + '_ {
    let total: usize = sizes.iter().sum();
    (0u64..1 << (3 * total)).map(move |bits| {
        let mut k = 0;
        sizes
            .iter()
            .map(|&n| {
                (0..n)
                    .map(|_| {
                        let b = bits >> (3 * k);
                        k += 1;
                        Replica { commit: b & 1 == 1, reachable: b & 2 == 2, touched: b & 4 == 4 }
                    })
                    .collect()
            })
            .collect()
    })
}

/// The prepare replies a recoverer gets in scenario `s` after O did `o`; `None` when the
/// scenario is impossible (O committed without a quorum, or touched nothing it could).
fn replies(s: &[Vec<Replica>], o: Original, o_cts: Cts) -> Option<Vec<Vec<PrepareReply>>> {
    if o == Original::AckedCommit && s.iter().any(|p| p.iter().filter(|r| r.commit).count() < quorum(p.len())) {
        return None;
    }
    if o == Original::Nothing && s.iter().flatten().any(|r| r.touched) {
        return None;
    }
    let mut k = 0;
    Some(
        s.iter()
            .map(|p| {
                p.iter()
                    .map(|r| {
                        k += 1;
                        let vote = if r.commit { c(k) } else { ReplicaVote::Abort };
                        match (r.reachable, o, r.touched) {
                            (false, ..) => PrepareReply::Unreachable,
                            (true, Original::AckedCommit, true) => PrepareReply::Applied(Decision::Commit(o_cts)),
                            (true, Original::RecordedAbort, true) => {
                                prepared(vote, Some(Recorded { ballot: Ballot(0), decision: RecordedDecision::Abort }))
                            }
                            (true, ..) => prepared(vote, None),
                        }
                    })
                    .collect()
            })
            .collect(),
    )
}

/// O's commit timestamp: the coordinator's rule over every commit vote.
fn o_cts(s: &[Vec<Replica>]) -> Cts {
    let mut k = 0;
    let votes: Vec<PartitionVotes> = s
        .iter()
        .map(|p| {
            PartitionVotes::new(
                p.iter()
                    .map(|r| {
                        k += 1;
                        if r.commit {
                            c(k)
                        } else {
                            ReplicaVote::Abort
                        }
                    })
                    .collect(),
            )
        })
        .collect();
    commit_cts(&votes).unwrap_or(Cts(1))
}

fn abort_acked(s: &[Vec<Replica>]) -> bool {
    s.iter().all(|p| p.iter().filter(|r| r.touched).count() >= majority(p.len()))
}

/// Runs `rule` over every scenario of `sizes` and returns the first violation of P1 (an
/// acknowledged commit is never aborted), P2 (an acknowledged abort is never committed) or P5b
/// (a commit from votes has a majority of commit votes in every partition).
///
/// Not checked here: that a recoverer's commit timestamp equals the one O applied at a
/// replica the recoverer cannot reach. With today's `commit_cts` (which includes the executors'
/// clock readings of the votes seen) it can differ; docs/design.md, "Recovery", gives the
/// counterexample and the fix the recoverer's driver needs first.
fn check(sizes: &[usize], rule: fn(&[Vec<PrepareReply>]) -> Recovery) -> Option<String> {
    for s in scenarios(sizes) {
        for o in [Original::Nothing, Original::AckedCommit, Original::RecordedAbort] {
            let cts = o_cts(&s);
            let Some(r) = replies(&s, o, cts) else { continue };
            let got = rule(&r);
            let bad = match (&got, o) {
                (Recovery::Decide { decision: Decision::Abort, .. }, Original::AckedCommit) => Some("P1"),
                (Recovery::Decide { decision: Decision::Commit(_), .. }, Original::RecordedAbort)
                    if abort_acked(&s) =>
                {
                    Some("P2")
                }
                (Recovery::Decide { decision: Decision::Commit(_), why: Why::Votes }, _)
                    if s.iter().any(|p| p.iter().filter(|r| r.commit && r.reachable).count() < majority(p.len())) =>
                {
                    Some("P5b")
                }
                _ => None,
            };
            if let Some(what) = bad {
                return Some(format!("{what}: O {o:?}, replicas {s:?} -> {got:?}"));
            }
        }
    }
    None
}

/// The NB variant (docs/design.md, "Recovery"): over every vote, reachability and record/apply
/// pattern of one and two partitions, the rule never reverses an acknowledged outcome and
/// commits from votes only with a majority of commit votes.
#[test]
fn the_rule_never_reverses_an_acknowledged_outcome() {
    for sizes in [&[1][..], &[2], &[3], &[4], &[5], &[1, 1], &[2, 2], &[3, 3], &[3, 2]] {
        assert_eq!(check(sizes, recover), None, "partitions of {sizes:?} replicas");
    }
}

/// The NB variant's tolerance: with at most one replica of each partition
/// unreachable, n = 3 and n = 5 never block; n = 4 can (Q - M = 0).
#[test]
fn one_dead_dc_never_blocks_for_three_and_five_replicas() {
    for n in [3usize, 5] {
        for s in scenarios(&[n]) {
            if s[0].iter().filter(|r| !r.reachable).count() > 1 {
                continue;
            }
            for o in [Original::Nothing, Original::AckedCommit, Original::RecordedAbort] {
                let Some(r) = replies(&s, o, o_cts(&s)) else { continue };
                assert!(matches!(recover(&r), Recovery::Decide { .. }), "n = {n}, O {o:?}, {s:?}");
            }
        }
    }
    // n = 4, Q = 3, M = 3: two commit votes of the three reachable replicas block.
    let r = vec![vec![
        prepared(c(1), None),
        prepared(c(2), None),
        prepared(ReplicaVote::Abort, None),
        PrepareReply::Unreachable,
    ]];
    assert_eq!(recover(&r), Recovery::Block { partitions: vec![0] });
}

/// Two recoverers one after the other (P3): once the first (with [`recover`]) has recorded its
/// decision at a majority of every partition, the second (with `rule`) decides the same, at
/// the same commit timestamp, whatever it can reach. The first violation, over one partition
/// of up to `max_n` replicas.
fn check_second_recoverer(max_n: usize, rule: fn(&[Vec<PrepareReply>]) -> Recovery) -> Option<String> {
    for n in 1..=max_n {
        // Per replica: vote, reachable by R1, recorded by R1, reachable by R2.
        for bits in 0u32..1 << (4 * n) {
            let bit = |i: usize, k: usize| bits >> (4 * i + k) & 1 == 1;
            let first: Vec<PrepareReply> = (0..n)
                .map(|i| if bit(i, 1) { prepared(vote(bit(i, 0), i), None) } else { PrepareReply::Unreachable })
                .collect();
            let Recovery::Decide { decision, .. } = recover(&[first]) else { continue };
            let recorded: Vec<bool> = (0..n).map(|i| bit(i, 1) && bit(i, 2)).collect();
            if recorded.iter().filter(|&&r| r).count() < majority(n) {
                continue; // not chosen: the second may decide otherwise
            }
            let rec = Recorded {
                ballot: Ballot(1),
                decision: match decision {
                    Decision::Commit(cts) => RecordedDecision::Commit(Some(cts)),
                    Decision::Abort => RecordedDecision::Abort,
                },
            };
            let second: Vec<PrepareReply> = (0..n)
                .map(|i| match (bit(i, 3), recorded[i]) {
                    (false, _) => PrepareReply::Unreachable,
                    (true, true) => prepared(vote(bit(i, 0), i), Some(rec)),
                    (true, false) => prepared(vote(bit(i, 0), i), None),
                })
                .collect();
            match rule(std::slice::from_ref(&second)) {
                Recovery::Decide { decision: d, .. } if d != decision => {
                    return Some(format!("n = {n}: first chose {decision:?}, second {d:?} from {second:?}"));
                }
                _ => {}
            }
        }
    }
    None
}

#[test]
fn a_recorded_decision_binds_every_later_recoverer() {
    assert_eq!(check_second_recoverer(5, recover), None);
}

/// Rule 2's abort from votes alone: more than `n - M` abort votes abort without a majority of
/// answers (a partition whose other replicas were removed for good), and no sooner.
#[test]
fn abort_votes_alone_decide_without_a_majority() {
    let abort = || prepared(ReplicaVote::Abort, None);
    let aborted = Recovery::Decide { decision: Decision::Abort, why: Why::AbortVotes };
    // n = 2, M = 2: one abort vote leaves one replica that could vote commit.
    assert_eq!(recover(&[vec![PrepareReply::Unreachable, abort()]]), aborted);
    // n = 3, M = 2: one abort vote is not enough, two are.
    let one = vec![abort(), PrepareReply::Unreachable, PrepareReply::Unreachable];
    assert_eq!(recover(std::slice::from_ref(&one)), Recovery::Block { partitions: vec![0] });
    assert_eq!(recover(&[vec![abort(), abort(), PrepareReply::Unreachable]]), aborted);
    // In any partition of several.
    let r = recover(&[vec![prepared(c(1), None), PrepareReply::Unreachable], vec![abort(), PrepareReply::Unreachable]]);
    assert_eq!(r, aborted);
    // The mutant that waits for a majority blocks.
    let r = abort_votes_need_a_majority(&[vec![PrepareReply::Unreachable, abort()]]);
    assert_eq!(r, Recovery::Block { partitions: vec![0] });
}

/// Mutant: rule 2 counting abort votes against the coordinator's quorum
/// ([`abort_votes_against_quorum`]). Caught: with n = 3 a first recoverer commits from two
/// commit votes (rule 5) and records it; a second that sees the third replica's abort vote
/// aborts it.
#[test]
fn abort_votes_against_the_quorum_are_caught() {
    let found = check_second_recoverer(3, abort_votes_against_quorum).expect("the mutant is caught");
    assert!(found.starts_with("n = 3"), "{found}");
    assert_eq!(check(&[3], abort_votes_against_quorum), None, "the original coordinator alone cannot catch it");
}

fn vote(commit: bool, i: usize) -> ReplicaVote {
    if commit {
        c(i as u64 + 1)
    } else {
        ReplicaVote::Abort
    }
}

/// A recorded commit whose timestamp word is torn at one replica takes the timestamp from
/// another replica with the same ballot, and otherwise picks one above every commit vote.
#[test]
fn a_torn_commit_record_takes_its_timestamp_from_a_copy() {
    let torn = Recorded { ballot: Ballot(7), decision: RecordedDecision::Commit(None) };
    let whole = Recorded { ballot: Ballot(7), decision: RecordedDecision::Commit(Some(Cts(555))) };
    let r = vec![vec![prepared(c(1), Some(torn)), prepared(c(2), Some(whole)), PrepareReply::Unreachable]];
    assert_eq!(recover(&r), Recovery::Decide { decision: Decision::Commit(Cts(555)), why: Why::Record(Ballot(7)) });
    let r = vec![vec![prepared(c(1), Some(torn)), prepared(c(200), None), PrepareReply::Unreachable]];
    assert_eq!(recover(&r), Recovery::Decide { decision: Decision::Commit(Cts(301)), why: Why::Record(Ballot(7)) });
}

/// Mutant: the RedT paper's §5.1.1 rule ([`papers_rule`]) — commit when more than half the
/// replicas alive voted commit, abort otherwise, wait while more than a quarter are dead;
/// records ignored. The exhaustive check finds its counterexample:
/// n = 3, votes C, C, A, O proved and acknowledged the abort; the paper's recoverer commits it.
#[test]
fn the_papers_rule_is_caught() {
    let found = check(&[3], papers_rule).expect("the paper's rule reverses an acknowledged outcome");
    assert!(found.starts_with("P2") || found.starts_with("P1"), "{found}");
}

/// Mutant: votes beat a higher-ballot record ([`votes_beat_records`], rules 3 and 5 swapped).
/// Caught: an abort recorded at a majority and acknowledged is committed from a majority of
/// commit votes.
#[test]
fn votes_beating_records_is_caught() {
    let found = check(&[3], votes_beat_records).expect("votes beating records is caught");
    assert!(found.starts_with("P2"), "{found}");
}

/// Found by the simulation (sim-20dc seed 2008, bank): a DC that a commit left behind aborts
/// its own redo and is caught up, so its entry shows an applied abort over a commit vote. A
/// recoverer that met it first took it for the decision and aborted the redo of up-to-date DCs
/// whose phase 2 was lost, after the commit had been applied elsewhere. An applied commit wins,
/// in either order.
#[test]
fn an_applied_commit_wins_over_a_left_behind_dcs_abort() {
    let commit = PrepareReply::Applied(Decision::Commit(Cts(900)));
    let behind = PrepareReply::Applied(Decision::Abort);
    for p in [vec![behind.clone(), commit.clone()], vec![commit.clone(), behind.clone()]] {
        let r = recover(std::slice::from_ref(&p));
        assert_eq!(r, Recovery::Decide { decision: Decision::Commit(Cts(900)), why: Why::Applied }, "{p:?}");
    }
    // In another partition too.
    let r = recover(&[vec![behind.clone(), PrepareReply::Unreachable], vec![commit, PrepareReply::Unreachable]]);
    assert_eq!(r, Recovery::Decide { decision: Decision::Commit(Cts(900)), why: Why::Applied });
    // An abort applied alone still decides.
    let r = recover(&[vec![behind, PrepareReply::Unreachable]]);
    assert_eq!(r, Recovery::Decide { decision: Decision::Abort, why: Why::Applied });
}

/// Rule 2 decides only what nothing else can ever decide: over every vote, coordinator abort
/// record and reachability pattern of up to five replicas in one or two partitions, whenever
/// a first recoverer aborts from abort votes and records alone (and records nothing), the
/// original coordinator cannot have committed, and a second recoverer reaching any replicas
/// never commits.
#[test]
fn an_abort_from_votes_and_records_alone_is_forced() {
    for sizes in [&[1][..], &[2], &[3], &[4], &[5], &[2, 2], &[3, 2]] {
        let total: usize = sizes.iter().sum();
        let mut fired = 0;
        // Per replica: vote commit, holds O's abort record, reachable by R1, reachable by R2.
        for bits in 0u32..1 << (4 * total) {
            let bit = |i: usize, k: usize| bits >> (4 * i + k) & 1 == 1;
            let view = |reach: usize| -> Vec<Vec<PrepareReply>> {
                let mut i = 0;
                sizes
                    .iter()
                    .map(|&n| {
                        (0..n)
                            .map(|_| {
                                let r = i;
                                i += 1;
                                if !bit(r, reach) {
                                    return PrepareReply::Unreachable;
                                }
                                let record = bit(r, 1)
                                    .then_some(Recorded { ballot: Ballot(0), decision: RecordedDecision::Abort });
                                prepared(vote(bit(r, 0), r), record)
                            })
                            .collect()
                    })
                    .collect()
            };
            if recover(&view(2)) != (Recovery::Decide { decision: Decision::Abort, why: Why::AbortVotes }) {
                continue;
            }
            fired += 1;
            let any_record = (0..total).any(|r| bit(r, 1));
            let mut i = 0;
            let o_could_commit = !any_record
                && sizes.iter().all(|&n| {
                    let commits = (i..i + n).filter(|&r| bit(r, 0)).count();
                    i += n;
                    commits >= quorum(n)
                });
            assert!(!o_could_commit, "{sizes:?}, bits {bits:#b}: O may have committed");
            let second = recover(&view(3));
            assert!(
                !matches!(second, Recovery::Decide { decision: Decision::Commit(_), .. }),
                "{sizes:?}, bits {bits:#b}: a second recoverer commits: {second:?}"
            );
        }
        assert!(fired > 0, "{sizes:?}: rule 2 fired somewhere");
    }
}
