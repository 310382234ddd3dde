//! The coordinator's commit/abort decision over phase-1 votes: the ¾ quorum of up-to-date
//! replicas per partition, and the choice of the commit timestamp `cts` (RedT §4.2 "¾ quorum";
//! docs/design.md §2, "Decision").
//!
//! This is a sans-IO core: [`decide`] is a pure function of the votes the caller has collected
//! so far. It reads no clock and sends nothing. The driver calls it again after every new vote,
//! and once more with `final_round = true` when its timeout fires; it acts on the first answer
//! that is not [`Ruling::Wait`]: a [`Ruling::Decide`] carries the protocol's one [`Decision`]
//! type and [`Why`] the rule chose it.
//!
//! The rule, per touched partition with `n` replicas and `Q = ceil(3n/4)` ([`quorum`]):
//! - the *newest* version of an item is the maximum, ordered by `(cts, update counter)`, over
//!   every commit vote received for that partition;
//! - a replica is *up-to-date* iff it voted commit and reported, for every item, exactly the
//!   newest version;
//! - commit iff every partition has at least `Q` up-to-date votes;
//! - abort, *proven*, iff some partition can no longer reach `Q`: up-to-date + missing `< Q`
//!   (a stale commit vote never becomes up-to-date, since the newest version only grows as votes
//!   arrive, and an abort vote never changes);
//! - otherwise wait, or abort *unproven* on the final round (a timeout).
//!
//! Recording aborts at a [`majority`] before acting on them, and the recoverer's rules, belong to
//! the callers (docs/design.md §2 and "Recovery").

use std::collections::BTreeMap;

use redt_dc_executor::CellVersion;
use redt_proto::{Cts, Decision};

/// One item of a partition that a transaction touches: a cell of one of its accesses.
///
/// Items are named by the transaction's plan, so every replica of a partition reports the same
/// keys for the same items.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItemKey {
    /// Index of the access in the transaction's plan (`Procedure::accesses`).
    pub access: u32,
    /// Cell of the accessed record.
    pub cell: u16,
    /// For a row of a range read (access `access` routes the range): the row's key. Rows are
    /// named by key, so a replica missing a row omits its item (and is stale), and one whose
    /// row holds an older version is stale, as for point reads.
    pub row: Option<u64>,
}

impl ItemKey {
    /// Returns the key of cell `cell` of access `access`.
    pub fn new(access: u32, cell: u16) -> Self {
        ItemKey { access, cell, row: None }
    }

    /// Returns the key of cell `cell` of the row `key` of the range read routed by `access`.
    pub fn row(access: u32, key: u64, cell: u16) -> Self {
        ItemKey { access, cell, row: Some(key) }
    }
}

/// What one replica of a partition has answered to phase 1 so far (RedT §4.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicaVote {
    /// No reply yet, or the reply timed out. It may still become a commit or an abort vote.
    Missing,
    /// The replica voted abort (for example a No-Wait lock conflict). Final.
    Abort,
    /// The replica voted commit. Final.
    Commit {
        /// The version this replica saw for every item of the partition that the transaction
        /// touches, in any order.
        versions: Vec<(ItemKey, CellVersion)>,
        /// The executor's hybrid-logical-clock reading (48-bit `Cts` units: milliseconds << 8
        /// plus a logical counter, see `redt_dc_executor::Hlc`); `cts` is chosen above it.
        hlc: Cts,
    },
}

/// The votes of every replica of one touched partition; `replicas.len()` is the partition's
/// replica count `n`, and every replica has exactly one slot (a [`ReplicaVote::Missing`] until
/// it answers).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionVotes {
    /// One vote per replica, in the partition's placement order.
    pub replicas: Vec<ReplicaVote>,
}

/// Counts of a partition's votes by kind, as the decision rule sees them; the four counts add
/// up to the replica count `n`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tally {
    /// Commit votes that carry the newest version of every item.
    pub up_to_date: usize,
    /// Commit votes that carry an older version of some item (or omit an item); they never
    /// count towards the quorum.
    pub stale: usize,
    /// Abort votes.
    pub abort: usize,
    /// Replicas that have not answered.
    pub missing: usize,
}

impl Tally {
    /// Returns the replica count `n` (the sum of the four counts).
    pub fn n(&self) -> usize {
        self.up_to_date + self.stale + self.abort + self.missing
    }

    /// Returns whether the partition has a commit quorum: at least [`quorum`]`(n)` up-to-date
    /// commit votes (RedT §4.2; docs/design.md §2).
    pub fn has_quorum(&self) -> bool {
        self.up_to_date >= quorum(self.n())
    }

    /// Returns whether the partition can still reach a commit quorum if every missing replica
    /// turns out up-to-date; `false` proves the transaction must abort (docs/design.md §2).
    pub fn can_reach_quorum(&self) -> bool {
        self.up_to_date + self.missing >= quorum(self.n())
    }
}

/// The coordinator's answer to the votes seen so far (RedT §4.2; docs/design.md §2); the recoverer's
/// counterpart is [`crate::recovery::Recovery`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ruling {
    /// Decided. A [`Decision::Commit`] (at [`commit_cts`] of the votes) may be acknowledged to
    /// the client at once (early ack). A [`Decision::Abort`] must be recorded at a [`majority`]
    /// of every partition's replicas before it is acknowledged or acted on (docs/design.md §2).
    Decide {
        /// The decision.
        decision: Decision,
        /// Which case of the rule gave it.
        why: Why,
    },
    /// Neither commit nor abort follows yet: wait for more votes (or the timeout).
    Wait,
}

/// The case of the rule that gave a [`Ruling::Decide`]; an abort names the partition it is
/// about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Why {
    /// Commit: every partition has a ¾ quorum of up-to-date commit votes.
    Quorum,
    /// Abort, proven: the votes of partition `partition` make commit impossible (fewer than `Q`
    /// up-to-date plus missing votes).
    CommitImpossible {
        /// Index into the `partitions` slice given to [`decide`] of the first such partition.
        partition: usize,
    },
    /// Abort, unproven, on the final round (a timeout): partition `partition` has no quorum
    /// yet.
    Timeout {
        /// Index into the `partitions` slice given to [`decide`] of the first partition
        /// without a quorum.
        partition: usize,
    },
}

impl Ruling {
    /// A commit at `cts`, for a quorum in every partition.
    fn commit(cts: Cts) -> Ruling {
        Ruling::Decide { decision: Decision::Commit(cts), why: Why::Quorum }
    }

    /// An abort, for `why`.
    fn abort(why: Why) -> Ruling {
        Ruling::Decide { decision: Decision::Abort, why }
    }
}

pub use redt_proto::{majority, quorum};

impl PartitionVotes {
    /// Returns the votes `replicas`, one per replica in placement order.
    pub fn new(replicas: Vec<ReplicaVote>) -> Self {
        PartitionVotes { replicas }
    }

    /// Returns a partition of `n` replicas of which none has answered yet.
    pub fn missing(n: usize) -> Self {
        PartitionVotes { replicas: vec![ReplicaVote::Missing; n] }
    }

    /// Returns the replica count `n`.
    pub fn n(&self) -> usize {
        self.replicas.len()
    }

    /// Returns the newest version of every item reported by any commit vote, ordered by
    /// `(cts, update counter)`, as `(item, version)` pairs ascending by item.
    pub fn newest(&self) -> Vec<(ItemKey, CellVersion)> {
        self.newest_map().into_iter().collect()
    }

    fn newest_map(&self) -> BTreeMap<ItemKey, CellVersion> {
        let mut newest: BTreeMap<ItemKey, CellVersion> = BTreeMap::new();
        for vote in &self.replicas {
            if let ReplicaVote::Commit { versions, .. } = vote {
                for &(item, v) in versions {
                    newest
                        .entry(item)
                        .and_modify(|cur| *cur = if v.rank() > cur.rank() { v } else { *cur })
                        .or_insert(v);
                }
            }
        }
        newest
    }

    /// Returns, per replica in placement order, whether it is up-to-date: it voted commit and
    /// reported exactly the newest version (see [`PartitionVotes::newest`]) of every item.
    ///
    /// A commit vote that omits an item another commit vote reports is not up-to-date: it does
    /// not show that it holds the newest version.
    pub fn up_to_date(&self) -> Vec<bool> {
        let newest = self.newest_map();
        self.replicas.iter().map(|vote| is_up_to_date(vote, &newest)).collect()
    }

    /// Returns the counts of up-to-date, stale, abort and missing votes.
    pub fn tally(&self) -> Tally {
        let newest = self.newest_map();
        tally_with(&self.replicas, &newest)
    }
}

fn is_up_to_date(vote: &ReplicaVote, newest: &BTreeMap<ItemKey, CellVersion>) -> bool {
    let ReplicaVote::Commit { versions, .. } = vote else {
        return false;
    };
    if !versions.iter().all(|(item, v)| newest.get(item) == Some(v)) {
        return false;
    }
    // Every reported version is the newest; it must also cover every item (duplicates aside).
    let mut items: Vec<ItemKey> = versions.iter().map(|&(item, _)| item).collect();
    items.sort_unstable();
    items.dedup();
    items.len() == newest.len()
}

fn tally_with(replicas: &[ReplicaVote], newest: &BTreeMap<ItemKey, CellVersion>) -> Tally {
    let mut t = Tally::default();
    for vote in replicas {
        match vote {
            ReplicaVote::Missing => t.missing += 1,
            ReplicaVote::Abort => t.abort += 1,
            ReplicaVote::Commit { .. } if is_up_to_date(vote, newest) => t.up_to_date += 1,
            ReplicaVote::Commit { .. } => t.stale += 1,
        }
    }
    t
}

/// Folds one up-to-date vote into the running maximum of `hlc` and version timestamps.
fn max_ts(acc: u64, vote: &ReplicaVote) -> u64 {
    match vote {
        ReplicaVote::Commit { versions, hlc } => versions.iter().map(|(_, v)| v.cts().0).fold(acc.max(hlc.0), u64::max),
        ReplicaVote::Missing | ReplicaVote::Abort => acc,
    }
}

/// Turns the maximum timestamp of the up-to-date votes into the commit timestamp.
fn cts_above(max: u64) -> Cts {
    Cts(max.saturating_add(1).min(Cts::MASK))
}

/// Returns the commit timestamp the up-to-date votes of `partitions` determine, or `None` when
/// no partition has an up-to-date vote (RedT §4.2; docs/design.md §2).
///
/// `cts = 1 + max` over every up-to-date vote of every partition of its `hlc` and of the commit
/// timestamp of every version it reports, so it is above every version the transaction read or
/// overwrites and above every executor clock reading in those votes. It depends only on the set
/// of up-to-date votes, never on their order, nor on stale, abort or missing votes, so a
/// recoverer that sees the same votes computes the same value.
///
/// The result is clamped to 48 bits: when the maximum is already [`Cts::MAX`] (or an `hlc` is
/// out of range) the result is `Cts::MAX`, and the strict "above" property is lost. With the
/// HLC's 2^40 milliseconds from its origin that is decades away; a timestamp never wraps.
///
/// The value grows when more up-to-date votes arrive, so the driver must fix `cts` at its first
/// [`Decision::Commit`] and carry it in the decision record, not recompute it later.
pub fn commit_cts(partitions: &[PartitionVotes]) -> Option<Cts> {
    let mut max: Option<u64> = None;
    for p in partitions {
        let newest = p.newest_map();
        for vote in p.replicas.iter().filter(|v| is_up_to_date(v, &newest)) {
            max = Some(max_ts(max.unwrap_or(0), vote));
        }
    }
    max.map(cts_above)
}

/// Decides commit, abort or wait from the votes of every touched partition (RedT §4.2
/// "¾ quorum"; docs/design.md §2, "Decision").
///
/// `partitions` holds one [`PartitionVotes`] per touched partition, each with one slot per
/// replica. `final_round` is set by the caller when its vote timeout has fired: a
/// [`Ruling::Wait`] then becomes an abort for [`Why::Timeout`].
///
/// - Commit at `cts` ([`Why::Quorum`]) iff every partition has at least `Q(n)` up-to-date
///   commit votes; `cts` is [`commit_cts`] of the same votes.
/// - Abort for [`Why::CommitImpossible`] `{ partition }` iff some partition has up-to-date +
///   missing `< Q(n)`; `partition` is the first such one. This holds whatever `final_round`
///   says.
/// - Otherwise `Wait`, or abort for [`Why::Timeout`] `{ partition }` on the final round with
///   `partition` the first partition short of a quorum.
///
/// # Panics
///
/// Panics if `partitions` is empty or a partition has no replicas: the planner always touches
/// at least one partition, and a validated topology gives every partition a replica.
pub fn decide(partitions: &[PartitionVotes], final_round: bool) -> Ruling {
    assert!(!partitions.is_empty(), "a transaction touches at least one partition");
    let mut first_short = None;
    let mut max = 0u64;
    for (i, p) in partitions.iter().enumerate() {
        assert!(p.n() > 0, "partition {i} of the transaction has no replicas");
        let newest = p.newest_map();
        let tally = tally_with(&p.replicas, &newest);
        if !tally.can_reach_quorum() {
            return Ruling::abort(Why::CommitImpossible { partition: i });
        }
        if !tally.has_quorum() {
            first_short.get_or_insert(i);
            continue;
        }
        if first_short.is_none() {
            max = p.replicas.iter().filter(|v| is_up_to_date(v, &newest)).fold(max, max_ts);
        }
    }
    match first_short {
        None => Ruling::commit(cts_above(max)),
        Some(partition) if final_round => Ruling::abort(Why::Timeout { partition }),
        Some(_) => Ruling::Wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(uc: u16, cts: u64) -> CellVersion {
        CellVersion::new(uc, Cts(cts))
    }

    fn commit(versions: &[(u32, u16, CellVersion)], hlc: u64) -> ReplicaVote {
        ReplicaVote::Commit {
            versions: versions.iter().map(|&(a, c, v)| (ItemKey::new(a, c), v)).collect(),
            hlc: Cts(hlc),
        }
    }

    fn part(replicas: Vec<ReplicaVote>) -> PartitionVotes {
        PartitionVotes::new(replicas)
    }

    /// RedT §4.2 "¾ quorum", docs/design.md §2: Q(n) = ceil(3n/4).
    #[test]
    fn quorum_sizes() {
        let expected = [1, 2, 3, 3, 4, 5, 6, 6];
        for (n, q) in (1..=8).zip(expected) {
            assert_eq!(quorum(n), q, "Q({n})");
        }
        assert_eq!(quorum(0), 0);
    }

    /// docs/design.md §2 (aborts recorded at a majority): M(n) = floor(n/2) + 1.
    #[test]
    fn majority_sizes() {
        let expected = [1, 2, 2, 3, 3, 4, 4, 5];
        for (n, m) in (1..=8).zip(expected) {
            assert_eq!(majority(n), m, "M({n})");
        }
    }

    /// RedT §4.2 "¾ quorum", docs/design.md §2: n = 4, Q = 3 up-to-date commits in each partition
    /// commit; cts is above every version and hlc of the up-to-date votes only.
    #[test]
    fn commit_with_quorum() {
        let fresh = |hlc| commit(&[(0, 1, v(3, 100)), (1, 0, v(1, 90))], hlc);
        let p0 = part(vec![fresh(50), fresh(120), ReplicaVote::Missing, fresh(60)]);
        let p1 = part(vec![commit(&[(2, 0, v(9, 130))], 10), ReplicaVote::Missing, commit(&[(2, 0, v(9, 130))], 10)]);
        // p1: n = 3, Q = 3, only 2 up-to-date and 1 missing: not yet.
        assert_eq!(decide(&[p0.clone(), p1.clone()], false), Ruling::Wait);
        let p1 = part(vec![commit(&[(2, 0, v(9, 130))], 10); 3]);
        assert_eq!(decide(&[p0.clone(), p1.clone()], false), Ruling::commit(Cts(131)));
        assert_eq!(decide(&[p0, p1], true), Ruling::commit(Cts(131)));
    }

    /// RedT §4.2 "¾ quorum", docs/design.md §2: an abort vote or a stale commit vote never counts, so
    /// up-to-date + missing < Q proves the abort, even before the timeout.
    #[test]
    fn proven_abort() {
        let fresh = commit(&[(0, 0, v(2, 200))], 1);
        let stale = commit(&[(0, 0, v(1, 150))], 999);
        let p0 = part(vec![fresh.clone(), fresh.clone(), fresh.clone()]);
        // n = 4, Q = 3: 2 up-to-date, 1 stale, 1 abort → at most 2.
        let p1 = part(vec![fresh.clone(), stale.clone(), ReplicaVote::Abort, fresh.clone()]);
        assert_eq!(decide(&[p0.clone(), p1.clone()], false), Ruling::abort(Why::CommitImpossible { partition: 1 }));
        assert_eq!(p1.tally(), Tally { up_to_date: 2, stale: 1, abort: 1, missing: 0 });
        // A proven abort wins over an earlier partition that only waits.
        let p0 = part(vec![fresh.clone(), ReplicaVote::Missing, ReplicaVote::Missing]);
        assert_eq!(decide(&[p0, p1], false), Ruling::abort(Why::CommitImpossible { partition: 1 }));
    }

    /// docs/design.md §2: neither a quorum nor a proof of abort → wait.
    #[test]
    fn wait_while_quorum_reachable() {
        let fresh = commit(&[(0, 0, v(2, 200))], 1);
        let p0 =
            part(vec![fresh.clone(), ReplicaVote::Abort, ReplicaVote::Missing, fresh.clone(), ReplicaVote::Missing]);
        // n = 5, Q = 4: 2 up-to-date + 2 missing can still reach 4.
        assert_eq!(decide(std::slice::from_ref(&p0), false), Ruling::Wait);
        assert_eq!(decide(&[PartitionVotes::missing(3)], false), Ruling::Wait);
    }

    /// docs/design.md §2: on the final round (timeout) a wait becomes an unproven abort, naming the
    /// first partition short of a quorum.
    #[test]
    fn timeout_aborts_unproven() {
        let fresh = commit(&[(0, 0, v(2, 200))], 1);
        let full = part(vec![fresh.clone(); 3]);
        let short = part(vec![fresh.clone(), ReplicaVote::Missing, fresh.clone()]);
        assert_eq!(decide(&[full.clone(), short.clone()], true), Ruling::abort(Why::Timeout { partition: 1 }));
        assert_eq!(decide(&[full, short], false), Ruling::Wait);
    }

    /// RedT §4.2: a stale commit vote does not count even if it is the Q-th commit vote.
    #[test]
    fn stale_commit_never_counts() {
        let fresh = commit(&[(0, 0, v(2, 200)), (0, 1, v(5, 180))], 1);
        let stale = commit(&[(0, 0, v(2, 200)), (0, 1, v(4, 170))], 1);
        // n = 4, Q = 3: three commit votes, one stale.
        let p = part(vec![fresh.clone(), stale.clone(), fresh.clone(), ReplicaVote::Abort]);
        assert_eq!(decide(std::slice::from_ref(&p), false), Ruling::abort(Why::CommitImpossible { partition: 0 }));
        let p = part(vec![fresh.clone(), stale, fresh, ReplicaVote::Missing]);
        assert_eq!(decide(std::slice::from_ref(&p), false), Ruling::Wait);
        assert_eq!(p.up_to_date(), vec![true, false, true, false]);
    }

    /// A vote that omits an item is not up-to-date, and versions order by cts before the
    /// (wrapping) update counter.
    #[test]
    fn missing_item_and_version_order() {
        let both = commit(&[(0, 0, v(0, 300)), (1, 0, v(1, 10))], 1);
        let only_one = commit(&[(0, 0, v(0, 300))], 1);
        // Counter wrapped to 0 at cts 300; 0xFFFF at cts 299 is older.
        let older = commit(&[(0, 0, v(0xFFFF, 299)), (1, 0, v(1, 10))], 1);
        let p = part(vec![both, only_one, older]);
        assert_eq!(p.newest(), vec![(ItemKey::new(0, 0), v(0, 300)), (ItemKey::new(1, 0), v(1, 10))]);
        assert_eq!(p.up_to_date(), vec![true, false, false]);
    }

    /// docs/design.md §2: cts fits 48 bits; it saturates at Cts::MAX instead of wrapping.
    #[test]
    fn cts_saturates() {
        let p = part(vec![commit(&[(0, 0, v(1, Cts::MASK))], 5)]);
        assert_eq!(decide(std::slice::from_ref(&p), false), Ruling::commit(Cts::MAX));
        let p = part(vec![commit(&[(0, 0, v(1, 7))], u64::MAX)]);
        assert_eq!(decide(std::slice::from_ref(&p), false), Ruling::commit(Cts::MAX));
        let p = part(vec![commit(&[(0, 0, v(1, Cts::MASK - 1))], 5)]);
        assert_eq!(commit_cts(std::slice::from_ref(&p)), Some(Cts::MAX));
    }

    /// docs/design.md §2: cts depends only on the up-to-date votes, not on stale ones nor on order.
    #[test]
    fn cts_ignores_stale_votes_and_order() {
        let fresh = |hlc| commit(&[(0, 0, v(2, 200))], hlc);
        let stale = commit(&[(0, 0, v(1, 150))], 10_000);
        let a = part(vec![fresh(300), stale.clone(), fresh(250), fresh(100)]);
        let b = part(vec![fresh(100), fresh(300), fresh(250), ReplicaVote::Abort]);
        assert_eq!(decide(std::slice::from_ref(&a), false), Ruling::commit(Cts(301)));
        assert_eq!(decide(std::slice::from_ref(&b), false), Ruling::commit(Cts(301)));
        assert_eq!(commit_cts(&[a]), Some(Cts(301)));
        assert_eq!(commit_cts(&[PartitionVotes::missing(2)]), None);
    }

    #[test]
    #[should_panic(expected = "at least one partition")]
    fn no_partitions_panics() {
        decide(&[], false);
    }
}
