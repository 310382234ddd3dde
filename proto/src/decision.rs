//! The outcome of a transaction: commit at a timestamp, or abort. One type from the
//! coordinator's decision rule through the messages to the executor that applies it.

use crate::ids::Cts;

/// A transaction's decision (RedT §4.2; docs/design.md §2): what the coordinator's rule (and a
/// recoverer's) chooses, what Record, Decide and LogDecision carry, and what an executor
/// records and applies.
///
/// On the wire it is a `commit` flag and a `cts` field ([`Decision::from_wire`],
/// [`Decision::to_wire`]). A redo entry's vote word keeps only the commit/abort code of a
/// recorded decision, without its timestamp (`redt_dc_executor::VoteCode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Commit at this timestamp.
    Commit(Cts),
    /// Abort.
    Abort,
}

impl Decision {
    /// Whether this is a commit.
    pub fn is_commit(self) -> bool {
        matches!(self, Decision::Commit(_))
    }

    /// The commit timestamp of a commit; `None` for an abort.
    pub fn cts(self) -> Option<Cts> {
        match self {
            Decision::Commit(cts) => Some(cts),
            Decision::Abort => None,
        }
    }

    /// Decodes the wire's `commit` flag and `cts` field: a commit at `cts` (truncated to 48
    /// bits), or an abort (its `cts` ignored).
    pub fn from_wire(commit: bool, cts: u64) -> Decision {
        if commit {
            Decision::Commit(Cts::new(cts))
        } else {
            Decision::Abort
        }
    }

    /// Encodes the wire's `commit` flag and `cts` field: `(true, cts)`, or `(false, 0)` for an
    /// abort.
    pub fn to_wire(self) -> (bool, u64) {
        match self {
            Decision::Commit(cts) => (true, cts.0),
            Decision::Abort => (false, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_round_trip() {
        for d in [Decision::Commit(Cts(0)), Decision::Commit(Cts(42)), Decision::Commit(Cts::MAX), Decision::Abort] {
            let (commit, cts) = d.to_wire();
            assert_eq!(Decision::from_wire(commit, cts), d);
            assert_eq!(commit, d.is_commit());
            assert_eq!(d.cts(), commit.then_some(Cts(cts)));
        }
        assert_eq!(Decision::from_wire(false, 7), Decision::Abort);
        assert_eq!(Decision::from_wire(true, u64::MAX), Decision::Commit(Cts::MAX));
    }
}
