//! The answers a node's coordinators gave their clients, counted for its metrics: per class,
//! aborts per cause, and a histogram of commit latency (relaxed atomics, one add each).

use redt_protocol::machine::TxnStatus;
use redt_protocol::stats::{AbortCause, Class};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the commit-latency histogram's buckets, in seconds (one more bucket,
/// `+Inf`, holds the rest): fine around the WAN round trips of 2–100 ms the shipped
/// topologies use.
pub const LATENCY_BUCKETS_SECONDS: [f64; 20] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0,
    10.0,
];

/// Answers of one node's coordinators since it started (not reset, unlike
/// [`crate::TxnStats`], which an embedded cluster shares and a bench resets after warm-up).
#[derive(Debug, Default)]
pub struct AnswerCounters {
    /// By `Class::index`: committed, aborted, unknown.
    by_class: [[AtomicU64; 3]; 4],
    /// Aborted answers by `AbortCause::index`.
    causes: [AtomicU64; AbortCause::ALL.len()],
    /// Committed answers per latency bucket (not cumulative); the last is `+Inf`.
    latency: [AtomicU64; LATENCY_BUCKETS_SECONDS.len() + 1],
    /// Sum of the committed answers' latencies, µs.
    latency_sum_us: AtomicU64,
}

/// A copy of [`AnswerCounters`] at one moment (each value read on its own).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AnswersSnapshot {
    /// Committed answers by class, in [`Class::all`] order.
    pub committed: [u64; 4],
    /// Aborted answers by class, in [`Class::all`] order.
    pub aborted: [u64; 4],
    /// Answers with an unknown outcome by class, in [`Class::all`] order.
    pub unknown: [u64; 4],
    /// Aborted answers by cause, in [`AbortCause::ALL`] order.
    pub causes: [u64; AbortCause::ALL.len()],
    /// Committed answers per latency bucket, not cumulative: one per
    /// [`LATENCY_BUCKETS_SECONDS`] bound, then `+Inf`.
    pub latency_buckets: Vec<u64>,
    /// Sum of the committed answers' latencies, seconds.
    pub latency_sum_seconds: f64,
}

impl AnswerCounters {
    /// Counts one answer of `class`: `status`, with `cause` for an abort and `latency` from
    /// the submission to the answer (histogrammed for a commit).
    pub fn record(&self, class: Class, status: &TxnStatus, cause: Option<AbortCause>, latency: Duration) {
        let row = &self.by_class[class.index()];
        match status {
            TxnStatus::Committed => {
                row[0].fetch_add(1, Relaxed);
                let seconds = latency.as_secs_f64();
                let bucket = LATENCY_BUCKETS_SECONDS.iter().position(|&b| seconds <= b);
                self.latency[bucket.unwrap_or(LATENCY_BUCKETS_SECONDS.len())].fetch_add(1, Relaxed);
                self.latency_sum_us.fetch_add(u64::try_from(latency.as_micros()).unwrap_or(u64::MAX), Relaxed);
            }
            TxnStatus::Aborted(_) => {
                row[1].fetch_add(1, Relaxed);
                if let Some(c) = cause {
                    self.causes[c.index()].fetch_add(1, Relaxed);
                }
            }
            TxnStatus::Unknown(_) => {
                row[2].fetch_add(1, Relaxed);
            }
        }
    }

    /// The values now.
    pub fn snapshot(&self) -> AnswersSnapshot {
        let get = |c: &AtomicU64| c.load(Relaxed);
        let per_class = |i: usize| Class::all().map(|c| get(&self.by_class[c.index()][i]));
        AnswersSnapshot {
            committed: per_class(0),
            aborted: per_class(1),
            unknown: per_class(2),
            causes: AbortCause::ALL.map(|c| get(&self.causes[c.index()])),
            latency_buckets: self.latency.iter().map(get).collect(),
            latency_sum_seconds: get(&self.latency_sum_us) as f64 / 1e6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_counted_by_class_cause_and_latency_bucket() {
        let c = AnswerCounters::default();
        let rw_inter = Class { read_write: true, inter_dc: true };
        let ro_intra = Class { read_write: false, inter_dc: false };
        c.record(rw_inter, &TxnStatus::Committed, None, Duration::from_millis(41));
        c.record(rw_inter, &TxnStatus::Committed, None, Duration::from_secs(60));
        c.record(ro_intra, &TxnStatus::Aborted("x".into()), Some(AbortCause::LockConflict), Duration::ZERO);
        c.record(ro_intra, &TxnStatus::Unknown("y".into()), None, Duration::ZERO);
        let s = c.snapshot();
        assert_eq!(s.committed, [2, 0, 0, 0]);
        assert_eq!(s.aborted, [0, 0, 0, 1]);
        assert_eq!(s.unknown, [0, 0, 0, 1]);
        assert_eq!(s.causes[AbortCause::LockConflict.index()], 1);
        assert_eq!(s.causes.iter().sum::<u64>(), 1);
        // 41 ms lands in the (0.04, 0.05] bucket, 60 s past the last bound.
        let at = |b: f64| LATENCY_BUCKETS_SECONDS.iter().position(|&x| x == b).unwrap();
        assert_eq!(s.latency_buckets[at(0.05)], 1);
        assert_eq!(s.latency_buckets[LATENCY_BUCKETS_SECONDS.len()], 1);
        assert_eq!(s.latency_buckets.iter().sum::<u64>(), 2);
        assert!((s.latency_sum_seconds - 60.041).abs() < 1e-9);
    }

    #[test]
    fn every_cause_has_its_own_index_and_name() {
        for (i, c) in AbortCause::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
        let mut names: Vec<&str> = AbortCause::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), AbortCause::ALL.len());
    }
}
