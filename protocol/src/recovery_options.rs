//! When and how persistently recovery and catch-ups run: the timeouts, retry pauses and
//! give-up bounds of the recoverer ([`crate::recoverer::Recoverer`]), the recovery task's scans
//! and the catch-up shippers ([`crate::catch_up::Shipper`]), scaled to the topology's RTT, and
//! the recoverer's deliberate bugs for the simulation's mutant seeds.

use redt_proto::Topology;
use std::time::Duration;

/// When and how persistently recovery runs (docs/design.md §2, recovery). The timeouts scale with
/// the topology: [`RecoveryOptions::for_topology`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryOptions {
    /// How far apart two nodes' clocks may be. Recovery of a transaction starts only once its
    /// phase-1 deadline has passed by this much, so no executor can still vote on it.
    pub clock_skew_bound: Duration,
    /// A node of the coordinator's DC recovers an undecided entry this long after the
    /// transaction's phase-1 deadline (plus the skew bound).
    pub own_dc_after: Duration,
    /// A node of any other DC waits this long instead (the coordinator's DC goes first)…
    pub other_dc_after: Duration,
    /// … plus this much per participant DC before its own in the transaction's participant
    /// list (the coordinator's DC left out), so the other DCs take turns rather than duel.
    pub turn: Duration,
    /// How long a round (prepare, record) waits for the DCs' answers.
    pub round_timeout: Duration,
    /// First retry pause; doubled per retry up to [`RecoveryOptions::retry_max`], with jitter.
    pub retry_base: Duration,
    /// Largest retry pause.
    pub retry_max: Duration,
    /// How often a node scans its ring for undecided entries (and looks for a gap at its
    /// head).
    pub scan_every: Duration,
    /// How long a gap stays at the head of a node's ring before the node asks its DC's
    /// writers which slots they still hold, and how long it waits before asking again when
    /// one of them does not answer ([`crate::gap_watch::GapWatch`]).
    pub gap_wait: Duration,
    /// How long a catch-up's [`crate::catch_up::Shipper`] keeps retrying a replica that does
    /// not acknowledge before it gives up (and its source's redo entries stop holding their
    /// ring's head; docs/design.md §2, "a catch-up outlives its source"). 30 s.
    pub catch_up_give_up: Duration,
    /// Deliberate bugs (tests of the simulation only).
    pub mutations: RecoveryMutations,
}

mutations! {
    /// Deliberate bugs in the recoverer, each caught by a named simulation seed
    /// (`sim/tests/seeds.rs`). All off by default. Has its fields only in a build with the
    /// `mutants` feature (the tests turn it on); without it, none, and every switch reads as off.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct RecoveryMutations {
        /// A commit found applied recomputes the catch-up from the promises even when no replica
        /// can have been left behind (so DCs that were up to date get an abort).
        pub catch_up_after_applied: bool,
        /// The RedT paper's §5.1.1 rule instead of ours ([`crate::recovery::papers_rule`]).
        pub papers_rule: bool,
        /// Votes beat a higher-ballot record ([`crate::recovery::votes_beat_records`]).
        pub votes_beat_records: bool,
        /// Applies (and releases the locks of) a decision as soon as it is chosen, without first
        /// recording it at a majority of every partition.
        pub act_before_recording: bool,
        /// A recovered commit's catch-up is shipped only by the source DC's executor, not also by
        /// the recoverer from the redo its promises carried: when another recoverer's decision
        /// reached the source first, the source takes this one for a repeat and ships nothing
        /// (sim seed 55, ycsb, default, `all,remove-node`, 6 s).
        pub ship_only_through_the_source: bool,
        /// A recovered commit tells a DC it did not hear from to abort as a DC left behind even
        /// when no source can ship it the values, so the DC drops an entry that may have been
        /// up to date and gets nothing in its place (sim seed 42023, churn on sim-20dc.yaml,
        /// `all,remove`, with the catch-up floors off).
        pub abort_unheard_without_catch_up: bool,
        /// A recovered commit's catch-up takes a commit vote that read a version at or past
        /// the commit's timestamp (a phase 1 run again after the commit was applied) for an
        /// up-to-date vote: it becomes the source and the replicas the commit counted are
        /// left behind with nothing to apply (sim seed 51086, bank on world-5dc-n5.yaml,
        /// `all,remove,remove-node`).
        pub stale_vote_as_source: bool,
        /// Abort votes and records alone never decide: a recoverer waits for a majority of
        /// every partition even when they rule out every commit
        /// ([`crate::recovery::abort_votes_need_a_majority`]).
        pub abort_votes_need_a_majority: bool,
    }
}

impl RecoveryOptions {
    /// Options scaled to `topology`'s largest link RTT `r`: rounds wait `4r` (at least 50
    /// ms), retries start at `2r` (at least 20 ms) and back off to 5 s, the coordinator's DC
    /// recovers `4r` (at least 100 ms) after the deadline and the others `10r` (at least 500
    /// ms) after it, one turn of `16r` (at least 200 ms) apart, scans run every 100 ms, a gap
    /// at a ring's head waits 200 ms, a catch-up gives up after 30 s; `clock_skew_bound` as
    /// given.
    pub fn for_topology(topology: &Topology, clock_skew_bound: Duration) -> RecoveryOptions {
        let rtt = topology.links.iter().flatten().map(|l| l.rtt).max().unwrap_or_default();
        RecoveryOptions {
            clock_skew_bound,
            own_dc_after: (4 * rtt).max(Duration::from_millis(100)),
            other_dc_after: (10 * rtt).max(Duration::from_millis(500)),
            turn: (16 * rtt).max(Duration::from_millis(200)),
            round_timeout: (4 * rtt).max(Duration::from_millis(50)),
            retry_base: (2 * rtt).max(Duration::from_millis(20)),
            retry_max: Duration::from_secs(5),
            scan_every: Duration::from_millis(100),
            gap_wait: Duration::from_millis(200),
            catch_up_give_up: Duration::from_secs(30),
            mutations: RecoveryMutations::default(),
        }
    }

    /// How long after its delete a deleted record may be freed (`redt_dc_executor`'s
    /// `deleted.rs`): twice [`RecoveryOptions::catch_up_give_up`] plus
    /// [`RecoveryOptions::clock_skew_bound`], so that only a catch-up still shipped after its
    /// shipper would have given up can meet a freed key's floor (60 s and the skew bound by
    /// default).
    pub fn deleted_grace(&self) -> Duration {
        self.catch_up_give_up.saturating_mul(2).saturating_add(self.clock_skew_bound)
    }

    /// How long after `start` (ms since the HLC origin) a node in the coordinator's DC
    /// (`own_dc`) or another may start recovering a transaction whose phase-1 timeout is
    /// `phase1_timeout`.
    pub fn recover_after(&self, phase1_timeout: Duration, own_dc: bool) -> Duration {
        let after = if own_dc { self.own_dc_after } else { self.other_dc_after };
        phase1_timeout + self.clock_skew_bound + after
    }
}
