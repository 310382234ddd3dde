//! Quorum sizes of a partition's replica set, shared by the coordinator's decision rule, the
//! recoverer and the membership state machine (one definition for every crate).

/// Returns the commit quorum `Q(n) = ceil(3n/4)` for a partition of `n` replicas (RedT §4.2
/// "¾ quorum"; docs/design.md §2): 1, 2, 3, 3, 4, 5, 6, 6 for `n` = 1..=8, and `Q(0) = 0`.
///
/// `2·Q(n) > n` for every `n ≥ 1`, so two quorums of one partition always share a replica
/// (RedT §4.2, "¾ quorum").
pub fn quorum(n: usize) -> usize {
    (3 * n).div_ceil(4)
}

/// Returns the majority `floor(n/2) + 1` of `n` replicas, the size at which aborts (and later
/// recovery records) are recorded (docs/design.md §2 and "Recovery").
pub fn majority(n: usize) -> usize {
    n / 2 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorums_intersect_and_majorities_too() {
        assert_eq!((1..=8).map(quorum).collect::<Vec<_>>(), [1, 2, 3, 3, 4, 5, 6, 6]);
        for n in 1..=64 {
            assert!(2 * quorum(n) > n, "two quorums of {n} share a replica");
            assert!(2 * majority(n) > n, "two majorities of {n} share a replica");
            assert!(quorum(n) >= majority(n), "Q({n}) is at least a majority");
        }
    }
}
