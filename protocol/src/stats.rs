//! Counters per transaction class (read-only / read-write × intra- / inter-DC): the RedT
//! paper's Table 2 figures, measured rather than derived; and the causes of aborts.

use redt_dc_executor::{AbortReason, LockConflictKind};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// A transaction class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Class {
    /// Whether the transaction writes.
    pub read_write: bool,
    /// Whether it involves another DC than the coordinator's.
    pub inter_dc: bool,
}

impl Class {
    /// Its index in report order's reverse (0 = `ro-intra` … 3 = `rw-inter`).
    pub fn index(self) -> usize {
        (self.read_write as usize) << 1 | self.inter_dc as usize
    }
    /// Every class, in report order.
    pub fn all() -> [Class; 4] {
        [
            Class { read_write: true, inter_dc: true },
            Class { read_write: true, inter_dc: false },
            Class { read_write: false, inter_dc: true },
            Class { read_write: false, inter_dc: false },
        ]
    }
    /// `rw-inter`, `rw-intra`, `ro-inter`, `ro-intra`.
    pub fn name(self) -> &'static str {
        match (self.read_write, self.inter_dc) {
            (true, true) => "rw-inter",
            (true, false) => "rw-intra",
            (false, true) => "ro-inter",
            (false, false) => "ro-intra",
        }
    }
}

/// Why a coordinator answered a transaction aborted, as a label for counters: the first
/// abort vote's reason; else a participant that could not vote; else the decision rule's own
/// case (the same order as the client's error text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AbortCause {
    /// A DC voted abort on a lock held in a conflicting mode (No-Wait), of a kind its node
    /// did not report.
    LockConflict,
    /// A DC voted abort: a cell it reads or writes was held exclusively (by a writer).
    LockExclusive,
    /// A DC voted abort: a cell it writes was held by readers.
    LockShared,
    /// A DC voted abort: a cell it reads already had the most readers a lock admits.
    LockReaders,
    /// A DC voted abort: a gap lock (a range read's or an insert's) was held.
    LockGap,
    /// A DC voted abort: a reader held the absence of a key it creates.
    LockAbsence,
    /// A DC voted abort: under its locks, a record, key or range it read had changed.
    LockChanged,
    /// A DC voted abort: a record does not exist.
    NotFound,
    /// A DC voted abort: the procedure aborted itself.
    User,
    /// A DC voted abort: a redo ring stayed full.
    RingFull,
    /// A DC voted abort: a record heap was full.
    HeapFull,
    /// A DC voted abort: a hash index was full.
    IndexFull,
    /// A DC voted abort: a recoverer had fenced the transaction.
    Fenced,
    /// A DC voted abort: a replica's epoch floor was above the transaction's epoch.
    StaleEpoch,
    /// A DC voted abort: a record it writes was freed after a delete and created again since
    /// the transaction started (a late copy of a phase 1).
    Superseded,
    /// A DC voted abort: a CHECK failed, a key read by the transaction's versioned read is no
    /// longer at that version on a replica (optimistic transactions).
    StaleRead,
    /// A participant could not vote (an error answer, an unreachable node, a call that timed
    /// out) and no vote said abort.
    NoVote,
    /// Commit was proven impossible by the votes (too many stale replicas for a quorum).
    CommitImpossible,
    /// The phase-1 deadline passed without a quorum.
    Timeout,
    /// A baseline's prepare or decision log did not reach its majority.
    Replication,
}

impl AbortCause {
    /// Every cause, in report order.
    pub const ALL: [AbortCause; 20] = [
        AbortCause::LockConflict,
        AbortCause::LockExclusive,
        AbortCause::LockShared,
        AbortCause::LockReaders,
        AbortCause::LockGap,
        AbortCause::LockAbsence,
        AbortCause::LockChanged,
        AbortCause::NotFound,
        AbortCause::User,
        AbortCause::RingFull,
        AbortCause::HeapFull,
        AbortCause::IndexFull,
        AbortCause::Fenced,
        AbortCause::StaleEpoch,
        AbortCause::Superseded,
        AbortCause::StaleRead,
        AbortCause::NoVote,
        AbortCause::CommitImpossible,
        AbortCause::Timeout,
        AbortCause::Replication,
    ];

    /// The cause of an abort vote with `reason`.
    pub fn of_vote(reason: &AbortReason) -> AbortCause {
        match reason {
            AbortReason::LockConflict { kind, .. } => match kind {
                LockConflictKind::Exclusive => AbortCause::LockExclusive,
                LockConflictKind::Shared => AbortCause::LockShared,
                LockConflictKind::Readers => AbortCause::LockReaders,
                LockConflictKind::Gap => AbortCause::LockGap,
                LockConflictKind::Absence => AbortCause::LockAbsence,
                LockConflictKind::Changed => AbortCause::LockChanged,
                LockConflictKind::Unspecified => AbortCause::LockConflict,
            },
            AbortReason::NotFound { .. } => AbortCause::NotFound,
            AbortReason::User(_) => AbortCause::User,
            AbortReason::RingFull(_) => AbortCause::RingFull,
            AbortReason::HeapFull(_) => AbortCause::HeapFull,
            AbortReason::IndexFull(_) => AbortCause::IndexFull,
            AbortReason::Fenced => AbortCause::Fenced,
            AbortReason::StaleEpoch { .. } => AbortCause::StaleEpoch,
            AbortReason::Superseded { .. } => AbortCause::Superseded,
            AbortReason::StaleRead { .. } => AbortCause::StaleRead,
        }
    }

    /// Its label value: `lock_conflict`, `lock_exclusive`, `lock_shared`, `lock_readers`,
    /// `lock_gap`, `lock_absence`, `lock_changed`, `not_found`, `user`, `ring_full`, `heap_full`,
    /// `index_full`, `fenced`, `stale_epoch`, `superseded`, `stale_read`, `no_vote`,
    /// `commit_impossible`, `timeout`, `replication`.
    pub fn name(self) -> &'static str {
        match self {
            AbortCause::LockConflict => "lock_conflict",
            AbortCause::LockExclusive => "lock_exclusive",
            AbortCause::LockShared => "lock_shared",
            AbortCause::LockReaders => "lock_readers",
            AbortCause::LockGap => "lock_gap",
            AbortCause::LockAbsence => "lock_absence",
            AbortCause::LockChanged => "lock_changed",
            AbortCause::NotFound => "not_found",
            AbortCause::User => "user",
            AbortCause::RingFull => "ring_full",
            AbortCause::HeapFull => "heap_full",
            AbortCause::IndexFull => "index_full",
            AbortCause::Fenced => "fenced",
            AbortCause::StaleEpoch => "stale_epoch",
            AbortCause::Superseded => "superseded",
            AbortCause::StaleRead => "stale_read",
            AbortCause::NoVote => "no_vote",
            AbortCause::CommitImpossible => "commit_impossible",
            AbortCause::Timeout => "timeout",
            AbortCause::Replication => "replication",
        }
    }

    /// The cause whose [`AbortCause::name`] is `name`; `None` for any other text (a cause a
    /// newer node added, say).
    pub fn from_name(name: &str) -> Option<AbortCause> {
        AbortCause::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Its index in [`AbortCause::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether running the same call again, as a new transaction, may commit: the abort came
    /// from the moment, not from the call or the data. A client may retry these after a pause
    /// (they certainly did not commit; see `redt_coordinator::RetryPolicy`):
    ///
    /// - [`AbortCause::LockConflict`] and the kinds of lock conflict
    ///   ([`AbortCause::LockExclusive`], [`AbortCause::LockShared`], [`AbortCause::LockReaders`],
    ///   [`AbortCause::LockGap`], [`AbortCause::LockAbsence`], [`AbortCause::LockChanged`]):
    ///   another transaction held a lock (No-Wait); it lets go within about one inter-DC round
    ///   trip, two when it aborts.
    /// - [`AbortCause::RingFull`]: a redo ring had no room; replay drains it.
    /// - [`AbortCause::Fenced`]: a recoverer fenced this transaction id, presuming its
    ///   coordinator dead; a new attempt runs under a new id.
    /// - [`AbortCause::StaleEpoch`]: the placement changed under the transaction; a new
    ///   attempt starts under the current epoch.
    /// - [`AbortCause::Superseded`]: a record it writes was deleted and created again since
    ///   it started; a new attempt starts after that.
    /// - [`AbortCause::StaleRead`]: a key it read optimistically changed since (or a replica
    ///   lags behind the version read); a new attempt reads the keys again first (the same
    ///   call again fails the same CHECK until the replica it failed on catches up).
    /// - [`AbortCause::NoVote`], [`AbortCause::Timeout`], [`AbortCause::Replication`]: a
    ///   participant or a majority did not answer in time (a slow link, a node restarting).
    /// - [`AbortCause::CommitImpossible`]: too many replicas were stale for a quorum; they
    ///   catch up.
    ///
    /// Not retryable, as running the call again gives the same answer:
    ///
    /// - [`AbortCause::User`]: the procedure aborted itself (its own logic, on the data it read).
    /// - [`AbortCause::NotFound`]: a record it needs does not exist.
    /// - [`AbortCause::HeapFull`], [`AbortCause::IndexFull`]: a MemStore's record heap or hash
    ///   index is full. Space comes back only when records are deleted and reclaimed, which a
    ///   pause of milliseconds does not bring; retrying would add load to a full store and hide
    ///   from the client a condition its operator must fix.
    pub fn is_retryable(self) -> bool {
        match self {
            AbortCause::LockConflict
            | AbortCause::LockExclusive
            | AbortCause::LockShared
            | AbortCause::LockReaders
            | AbortCause::LockGap
            | AbortCause::LockAbsence
            | AbortCause::LockChanged
            | AbortCause::RingFull
            | AbortCause::Fenced
            | AbortCause::StaleEpoch
            | AbortCause::Superseded
            | AbortCause::StaleRead
            | AbortCause::NoVote
            | AbortCause::CommitImpossible
            | AbortCause::Timeout
            | AbortCause::Replication => true,
            AbortCause::User | AbortCause::NotFound | AbortCause::HeapFull | AbortCause::IndexFull => false,
        }
    }
}

#[derive(Debug, Default)]
struct ClassCounters {
    committed: AtomicU64,
    aborted: AtomicU64,
    unknown: AtomicU64,
    committed_inter_dc_messages: AtomicU64,
    committed_round_trips: AtomicU64,
    committed_client_round_trips: AtomicU64,
}

/// Live counters of one coordinator node (or a whole embedded cluster).
#[derive(Debug)]
pub struct TxnStats {
    classes: [ClassCounters; 4],
    latency_us: Mutex<hdrhistogram::Histogram<u64>>,
}

impl Default for TxnStats {
    fn default() -> Self {
        TxnStats {
            classes: Default::default(),
            latency_us: Mutex::new(hdrhistogram::Histogram::new(3).expect("3 significant digits")),
        }
    }
}

/// What one finished transaction cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxnCost {
    /// Inter-DC messages sent or received for it (requests and replies, all phases).
    pub inter_dc_messages: u64,
    /// Inter-DC round trips on its commit path (phase 1 and phase 2).
    pub round_trips: u64,
    /// Inter-DC round trips its client waited for.
    pub client_round_trips: u64,
}

/// A snapshot of one class.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ClassReport {
    /// Committed transactions.
    pub committed: u64,
    /// Aborted transactions (certainly not committed).
    pub aborted: u64,
    /// Transactions with an unknown outcome.
    pub unknown: u64,
    /// Inter-DC messages per committed transaction.
    pub inter_dc_messages_per_txn: f64,
    /// Inter-DC round trips on the commit path per committed transaction.
    pub inter_dc_round_trips_per_txn: f64,
    /// Inter-DC round trips the client waited for, per committed transaction.
    pub client_round_trips_per_txn: f64,
}

impl TxnStats {
    /// Counts a committed transaction of `class` that took `latency_us` to acknowledge.
    pub fn committed(&self, class: Class, cost: TxnCost, latency_us: u64) {
        let c = &self.classes[class.index()];
        c.committed.fetch_add(1, Relaxed);
        c.committed_inter_dc_messages.fetch_add(cost.inter_dc_messages, Relaxed);
        c.committed_round_trips.fetch_add(cost.round_trips, Relaxed);
        c.committed_client_round_trips.fetch_add(cost.client_round_trips, Relaxed);
        let _ = self.latency_us.lock().expect("latency histogram").record(latency_us.max(1));
    }

    /// Counts an aborted transaction.
    pub fn aborted(&self, class: Class) {
        self.classes[class.index()].aborted.fetch_add(1, Relaxed);
    }

    /// Counts a transaction with an unknown outcome.
    pub fn unknown(&self, class: Class) {
        self.classes[class.index()].unknown.fetch_add(1, Relaxed);
    }

    /// Adds inter-DC messages sent after a commit was counted (phase 2 runs after the
    /// acknowledgement).
    pub fn add_messages(&self, class: Class, messages: u64) {
        self.classes[class.index()].committed_inter_dc_messages.fetch_add(messages, Relaxed);
    }

    /// Adds inter-DC messages and round trips of work that finished after a commit was
    /// counted (a commit phase run after an early acknowledgement).
    pub fn add_cost(&self, class: Class, messages: u64, round_trips: u64) {
        let c = &self.classes[class.index()];
        c.committed_inter_dc_messages.fetch_add(messages, Relaxed);
        c.committed_round_trips.fetch_add(round_trips, Relaxed);
    }

    /// The figures of `class`.
    pub fn report(&self, class: Class) -> ClassReport {
        let c = &self.classes[class.index()];
        let n = c.committed.load(Relaxed);
        let per = |x: &AtomicU64| if n == 0 { 0.0 } else { x.load(Relaxed) as f64 / n as f64 };
        ClassReport {
            committed: n,
            aborted: c.aborted.load(Relaxed),
            unknown: c.unknown.load(Relaxed),
            inter_dc_messages_per_txn: per(&c.committed_inter_dc_messages),
            inter_dc_round_trips_per_txn: per(&c.committed_round_trips),
            client_round_trips_per_txn: per(&c.committed_client_round_trips),
        }
    }

    /// A copy of the acknowledgement-latency histogram of committed transactions (µs).
    pub fn latency_us(&self) -> hdrhistogram::Histogram<u64> {
        self.latency_us.lock().expect("latency histogram").clone()
    }

    /// Clears every counter (end of a warm-up).
    pub fn reset(&self) {
        for c in &self.classes {
            for x in [
                &c.committed,
                &c.aborted,
                &c.unknown,
                &c.committed_inter_dc_messages,
                &c.committed_round_trips,
                &c.committed_client_round_trips,
            ] {
                x.store(0, Relaxed);
            }
        }
        self.latency_us.lock().expect("latency histogram").reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cause_is_named_once_and_read_back_by_its_name() {
        for (i, c) in AbortCause::ALL.into_iter().enumerate() {
            assert_eq!(c.index(), i, "ALL is in declaration order");
            assert_eq!(AbortCause::from_name(c.name()), Some(c));
        }
        let mut names: Vec<&str> = AbortCause::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), AbortCause::ALL.len());
        assert_eq!(AbortCause::from_name("a cause of a newer node"), None);
        assert_eq!(AbortCause::from_name(""), None);
    }

    #[test]
    fn only_the_causes_of_the_moment_are_retryable() {
        let retryable: Vec<AbortCause> = AbortCause::ALL.into_iter().filter(|c| c.is_retryable()).collect();
        assert_eq!(
            retryable,
            [
                AbortCause::LockConflict,
                AbortCause::LockExclusive,
                AbortCause::LockShared,
                AbortCause::LockReaders,
                AbortCause::LockGap,
                AbortCause::LockAbsence,
                AbortCause::LockChanged,
                AbortCause::RingFull,
                AbortCause::Fenced,
                AbortCause::StaleEpoch,
                AbortCause::Superseded,
                AbortCause::StaleRead,
                AbortCause::NoVote,
                AbortCause::CommitImpossible,
                AbortCause::Timeout,
                AbortCause::Replication,
            ]
        );
        for c in [AbortCause::User, AbortCause::NotFound, AbortCause::HeapFull, AbortCause::IndexFull] {
            assert!(!c.is_retryable(), "{c:?}: the same call gives the same answer");
        }
    }

    #[test]
    fn a_vote_s_reason_keeps_its_retryability() {
        use redt_dc_executor::AbortReason;
        assert!(AbortCause::of_vote(&AbortReason::Fenced).is_retryable());
        assert!(!AbortCause::of_vote(&AbortReason::User("no such item".into())).is_retryable());
    }
}
