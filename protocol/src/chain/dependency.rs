//! The commit rule of a chained transaction: its dependencies' outcomes first, then its own
//! votes with every pending read resolved (docs/design.md, "Localized execution across DCs").
//! The coordinator and a recoverer apply the same rule, so they reach the same outcome and the
//! same commit timestamp floor.

use super::{ChainMutations, ReadVersion};
use redt_dc_executor::CellVersion;
use redt_proto::{Cts, Decision, TxnId};

/// What a transaction's dependencies allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DependencyRuling {
    /// This dependency is not decided yet: decide it first (a recoverer recovers it).
    Wait(TxnId),
    /// This dependency aborted: the transaction aborts too (a cascading abort, recorded like
    /// any abort).
    Abort(TxnId),
    /// Every dependency committed: the transaction may commit on its own votes, at a commit
    /// timestamp of at least `floor` (one above the newest dependency's; `Cts(0)` with none).
    Commit {
        /// The least commit timestamp the transaction may take.
        floor: Cts,
    },
}

/// The ruling over `deps` given each one's outcome (`None`: undecided). The first undecided or
/// aborted dependency, in `deps`' order, is the one named.
pub fn dependency_ruling(
    deps: &[TxnId],
    outcome: impl Fn(TxnId) -> Option<Decision>,
    mutations: ChainMutations,
) -> DependencyRuling {
    let _ = mutations; // read only by the mutants
    if mutant!(mutations.drop_dependency) {
        let _ = (deps, &outcome);
        return DependencyRuling::Commit { floor: Cts(0) };
    }
    let mut floor = Cts(0);
    for &d in deps {
        match outcome(d) {
            None => return DependencyRuling::Wait(d),
            Some(Decision::Abort) => return DependencyRuling::Abort(d),
            Some(Decision::Commit(cts)) => floor = floor.max(Cts(cts.0.saturating_add(1).min(Cts::MASK))),
        }
    }
    DependencyRuling::Commit { floor }
}

/// A read once its creator's outcome is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resolved {
    /// The version read: committed, or the one a committed creator wrote.
    Version(CellVersion),
    /// The creator is undecided.
    Undecided(TxnId),
    /// The creator aborted: the value read was never committed.
    Aborted(TxnId),
}

/// Resolves `read` with its creator's outcome (`None`: undecided). A committed creator's
/// write has version `CellVersion::new(update_counter, cts)`, exactly what a replica that
/// applied the write before the reader arrived reports, so the replicas' votes compare as the
/// ¾-quorum decision compares versions (RedT §4.2; `crate::decision`).
pub fn resolve(read: ReadVersion, outcome: impl Fn(TxnId) -> Option<Decision>, mutations: ChainMutations) -> Resolved {
    let _ = mutations; // read only by the mutants
    match read {
        ReadVersion::Committed(v) => Resolved::Version(v),
        ReadVersion::Pending { creator, update_counter } => match outcome(creator) {
            Some(Decision::Commit(cts)) => Resolved::Version(CellVersion::new(update_counter, cts)),
            _ if mutant!(mutations.drop_dependency) => Resolved::Version(CellVersion::new(update_counter, Cts(0))),
            None => Resolved::Undecided(creator),
            Some(Decision::Abort) => Resolved::Aborted(creator),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcomes(list: &[(u64, Option<Decision>)]) -> impl Fn(TxnId) -> Option<Decision> + '_ {
        move |t| list.iter().find(|(id, _)| *id == t.0).and_then(|(_, d)| *d)
    }

    #[test]
    fn every_dependency_must_commit_and_the_floor_is_above_the_newest() {
        let m = ChainMutations::default();
        let o = [(1, Some(Decision::Commit(Cts(10)))), (2, Some(Decision::Commit(Cts(30)))), (3, None)];
        assert_eq!(dependency_ruling(&[], outcomes(&o), m), DependencyRuling::Commit { floor: Cts(0) });
        assert_eq!(
            dependency_ruling(&[TxnId(1), TxnId(2)], outcomes(&o), m),
            DependencyRuling::Commit { floor: Cts(31) }
        );
        assert_eq!(dependency_ruling(&[TxnId(1), TxnId(3)], outcomes(&o), m), DependencyRuling::Wait(TxnId(3)));
        let a = [(1, Some(Decision::Commit(Cts(10)))), (4, Some(Decision::Abort)), (3, None)];
        assert_eq!(
            dependency_ruling(&[TxnId(1), TxnId(4), TxnId(3)], outcomes(&a), m),
            DependencyRuling::Abort(TxnId(4))
        );
    }

    #[test]
    fn a_pending_read_resolves_to_the_version_its_creator_writes() {
        let m = ChainMutations::default();
        let o = [(1, Some(Decision::Commit(Cts(10)))), (2, Some(Decision::Abort)), (3, None)];
        let pending = |c| ReadVersion::Pending { creator: TxnId(c), update_counter: 5 };
        assert_eq!(resolve(pending(1), outcomes(&o), m), Resolved::Version(CellVersion::new(5, Cts(10))));
        assert_eq!(resolve(pending(2), outcomes(&o), m), Resolved::Aborted(TxnId(2)));
        assert_eq!(resolve(pending(3), outcomes(&o), m), Resolved::Undecided(TxnId(3)));
        let v = CellVersion::new(4, Cts(7));
        assert_eq!(resolve(ReadVersion::Committed(v), outcomes(&o), m), Resolved::Version(v));
        // A replica that applied the creator's write before the reader came reports the same.
        assert_eq!(
            resolve(ReadVersion::Committed(CellVersion::new(4, Cts(3)).next(Cts(10))), outcomes(&o), m),
            resolve(ReadVersion::Pending { creator: TxnId(1), update_counter: 5 }, outcomes(&o), m)
        );
    }
}
