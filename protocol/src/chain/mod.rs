//! Localized execution across DCs: chains of one coordinator's transactions on a hot cell,
//! executed against each other's uncommitted versions and committed in chain order (CREST §5–6
//! carried across the WAN; docs/design.md, "Localized execution across DCs").
//!
//! Under No-Wait a write lock is held from phase 1 to phase 2, about one and a half WAN round
//! trips, so a hot cell commits at most about once per round trip. A *chain* lets the next
//! transactions of the same coordinator on that cell run at once, in every replica DC, on the
//! value the previous one will write if it commits, instead of aborting on its lock:
//!
//! - **One order everywhere.** Only transactions of one coordinator chain, and the coordinator
//!   names each member's predecessor on each chained cell in its phase 1 (`after`). An
//!   executor admits a member only when its chain's tail on that cell is the named predecessor
//!   ([`Chains::admit`]); otherwise the member votes abort. So every DC that holds a replica
//!   runs a chain in the coordinator's order or not at all, and the replicas' votes agree.
//! - **Dependencies.** A member reads its predecessor's pending value and reports the read as
//!   [`ReadVersion::Pending`]; it depends on every predecessor it names. It commits only if
//!   every dependency commits, at a commit timestamp above theirs, and aborts if one aborts
//!   ([`dependency_ruling`]); a recoverer decides dependencies first with the same rule.
//! - **One lock, one write-back.** The chain's head takes the cell's lock as any phase 1 does;
//!   members inherit it. The lock is released, and the newest committed value written back
//!   (last writer wins), only when every member is decided at that executor
//!   ([`Chains::decide`]). Since each member depends on its predecessor, the committed members
//!   of a chain are a prefix of it.
//! - **Bounds.** A chain takes at most [`ChainLimits::max_members`] members and none once its
//!   head is older than [`ChainLimits::max_hold_ms`], so a chain cannot keep a hot cell from
//!   other coordinators for long; past them the coordinator queues the transaction until the
//!   chain drains ([`ChainPlanner::plan`]).
//! - **Epochs.** A chain belongs to the epoch of its head: a phase 1 of another epoch never
//!   joins it, so a placement change (failover) ends every chain.
//!
//! The executor side is [`Chains`], the coordinator side [`ChainPlanner`], the commit rule
//! [`dependency_ruling`] with [`resolve`]. All are pure; the rules are checked exhaustively
//! over every delivery order, loss, coordinator crash and recovery of small clusters
//! (`chain/model.rs`), together with the mutants of [`ChainMutations`].

mod dependency;
mod executor;
mod planner;

#[cfg(test)]
mod model;

pub use dependency::{dependency_ruling, resolve, DependencyRuling, Resolved};
pub use executor::{Admission, ChainHead, Chains, Drained, Joiner, Refusal};
pub use planner::{ChainPlan, ChainPlanner, PlannedAccess};

use redt_dc_executor::CellVersion;
use redt_proto::{TableId, TxnId};

/// One cell of one record: the unit a chain orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CellRef {
    /// Table of the record.
    pub table: TableId,
    /// Record key.
    pub key: u64,
    /// Cell index.
    pub cell: u16,
}

/// The version a phase 1 read for a cell, as its vote reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReadVersion {
    /// A committed version (the cell's own, or a drained chain's write-back).
    Committed(CellVersion),
    /// The value `creator` (a chain member, undecided when read) writes if it commits; its
    /// version will then be `CellVersion::new(update_counter, cts of creator)`.
    Pending {
        /// The member whose write was read.
        creator: TxnId,
        /// The update counter the cell has once `creator`'s write is applied.
        update_counter: u16,
    },
}

/// Bounds on one chain (docs/design.md, "Localized execution across DCs").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChainLimits {
    /// Most members of one chain, its head included (default 16).
    pub max_members: usize,
    /// No member joins a chain whose head took its lock this long ago, in ms (default 200).
    pub max_hold_ms: u64,
}

impl Default for ChainLimits {
    fn default() -> Self {
        ChainLimits { max_members: 16, max_hold_ms: 200 }
    }
}

mutations! {
    /// Deliberate bugs of the chain rules, for the exhaustive model's mutant tests. Has its
    /// fields only in a build with the `mutants` feature; without it, none, and every switch
    /// reads as off.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct ChainMutations {
        /// The executor orders a chain by arrival: a member joins whatever tail the cell's chain
        /// has, and one whose chain is missing takes the lock as a head, whatever predecessor
        /// its phase 1 names (two DCs can then run a chain in two orders).
        pub order_by_arrival: bool,
        /// The executor drains a chain, writing back and releasing the lock, as soon as any
        /// member commits, before its last member is decided.
        pub release_before_last_writer: bool,
        /// The commit rule ignores dependencies: a member commits on its own votes, whatever
        /// its predecessors' outcomes, and a pending read matches any version.
        pub drop_dependency: bool,
    }
}
