//! Figures shared by every report: latency percentiles, the outcomes of a run's
//! transactions, their retries and aborts by cause, their CPU cost, verbs per transaction,
//! MemStore footprint.

use hdrhistogram::Histogram;
use redt_coordinator::{AbortCause, Attempt, Retried, TxnStatus};
use redt_dc_executor::VerbCounts;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Latency percentiles (unit given by the field holding it: µs or ms).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Mean.
    pub mean: f64,
}

impl Latency {
    /// A histogram with 3 significant digits, auto-resizing.
    pub fn histogram() -> Histogram<u64> {
        Histogram::new(3).expect("3 significant digits is valid")
    }

    /// Percentiles of `h` (zero if empty).
    pub fn from_histogram(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Latency::default();
        }
        Latency {
            p50: h.value_at_quantile(0.5) as f64,
            p99: h.value_at_quantile(0.99) as f64,
            p999: h.value_at_quantile(0.999) as f64,
            mean: h.mean(),
        }
    }

    /// Percentiles in ms of `h`, a histogram of µs (zero if empty).
    pub fn ms_from_us(h: &Histogram<u64>) -> Self {
        let us = Latency::from_histogram(h);
        Latency { p50: us.p50 / 1e3, p99: us.p99 / 1e3, p999: us.p999 / 1e3, mean: us.mean / 1e3 }
    }
}

/// aborted / (committed + aborted); 0 when neither happened.
pub fn abort_rate(committed: u64, aborted: u64) -> f64 {
    if committed + aborted == 0 {
        0.0
    } else {
        aborted as f64 / (committed + aborted) as f64
    }
}

/// What the transactions of a run's measured interval came to, and how fast and how long
/// the committed ones took. Reports hold it with `#[serde(flatten)]`, so its fields appear
/// among theirs (JSON keys `committed`, …, `latency_ms`; CSV columns `latency_ms.p50`, …).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Outcomes {
    /// Committed transactions.
    pub committed: u64,
    /// Aborted transactions.
    pub aborted: u64,
    /// Transactions whose outcome stayed unknown.
    pub unknown: u64,
    /// Committed transactions per second of the measured interval.
    pub committed_per_s: f64,
    /// aborted / (committed + aborted) (see [`abort_rate`]).
    pub abort_rate: f64,
    /// Latency of committed transactions, in ms.
    pub latency_ms: Latency,
}

impl Outcomes {
    /// The outcomes of a measured interval of `duration` (not zero) in which `committed`,
    /// `aborted` and `unknown` transactions finished, the committed ones with the latencies
    /// in µs of `latency_us`.
    pub fn new(committed: u64, aborted: u64, unknown: u64, duration: Duration, latency_us: &Histogram<u64>) -> Self {
        Outcomes {
            committed,
            aborted,
            unknown,
            committed_per_s: committed as f64 / duration.as_secs_f64(),
            abort_rate: abort_rate(committed, aborted),
            latency_ms: Latency::ms_from_us(latency_us),
        }
    }

    /// The lines the human-readable reports show for these outcomes, without line breaks:
    /// committed per second, the abort rate with the counts, and p50/p99/p999 latency in
    /// ms.
    pub fn lines(&self) -> [String; 3] {
        let l = &self.latency_ms;
        [
            format!("  committed/s                {:>10.1}", self.committed_per_s),
            format!(
                "  abort rate                 {:>10.4}   ({} committed, {} aborted, {} unknown)",
                self.abort_rate, self.committed, self.aborted, self.unknown
            ),
            format!("  latency p50/p99/p999 ms    {:>6.1} / {:.1} / {:.1}", l.p50, l.p99, l.p999),
        ]
    }
}

/// Counts per cause as reports list them: `[name, count]` pairs in the order of `names`, the
/// causes counted zero times left out (the `abort_causes` of the YCSB, bank and list-append
/// reports, and of every type of the TPC-C report).
pub fn cause_counts<'a>(
    names: impl IntoIterator<Item = &'a str>,
    counts: impl IntoIterator<Item = u64>,
) -> Vec<(String, u64)> {
    names.into_iter().zip(counts).filter(|(_, n)| *n > 0).map(|(c, n)| (c.to_string(), n)).collect()
}

/// `name n, name n, …` of `causes` (as [`cause_counts`] lists them); `None` when empty.
pub fn causes_text(causes: &[(String, u64)]) -> Option<String> {
    (!causes.is_empty()).then(|| causes.iter().map(|(c, n)| format!("{c} {n}")).collect::<Vec<_>>().join(", "))
}

/// The label of aborted attempts that name no cause (a call refused before it ran, an older
/// node's answer) in [`Retries::abort_causes`].
pub const NO_CAUSE: &str = "other";

/// How a run's clients retried: the attempts their transactions took and why attempts
/// aborted. Reports hold it with `#[serde(flatten)]` after their [`Outcomes`], whose
/// `aborted` and `abort_rate` count attempts; a transaction given up counts here, in
/// `failed` (JSON keys and CSV columns `max_retries`, `attempts`, `retries`, `failed`,
/// `fail_rate`, `abort_causes`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Retries {
    /// The clients' bound: retries per transaction after an abort whose cause is retryable
    /// (`redt_coordinator::RetryPolicy::retries`; 0: never retried).
    pub max_retries: u32,
    /// Attempts: every submission, retries included.
    pub attempts: u64,
    /// Attempts after a transaction's first.
    pub retries: u64,
    /// Transactions given up: their last attempt aborted (a cause that is not retryable, or
    /// no retry left).
    pub failed: u64,
    /// failed / (committed + failed): the share of transactions with an outcome that were
    /// given up (without retries, the abort rate).
    pub fail_rate: f64,
    /// Aborted attempts per cause ([`AbortCause::name`]; [`NO_CAUSE`] for an abort that names
    /// none), in [`AbortCause::ALL`]'s order, causes with none left out.
    pub abort_causes: Vec<(String, u64)>,
}

impl Retries {
    /// The lines the human-readable reports show, without line breaks: the attempts and
    /// retries with the transactions given up, and the aborted attempts by cause (when any).
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "  fail rate                  {:>10.4}   ({} given up; {} attempts, {} retries, at most {} per txn)",
            self.fail_rate, self.failed, self.attempts, self.retries, self.max_retries
        )];
        if let Some(causes) = causes_text(&self.abort_causes) {
            out.push(format!("  aborted attempts by cause  {causes}"));
        }
        out
    }
}

/// The live counters behind a [`Retries`]: every transaction a client ran under a retry
/// policy ([`redt_coordinator::retrying`]) is added once it ends.
#[derive(Debug, Default)]
pub struct RetryCounts {
    transactions: AtomicU64,
    attempts: AtomicU64,
    committed: AtomicU64,
    failed: AtomicU64,
    /// Aborted attempts per cause, indexed like [`AbortCause::ALL`], then those without one.
    causes: [AtomicU64; AbortCause::ALL.len() + 1],
}

impl RetryCounts {
    /// Counts the transaction `r` (its attempts, its aborted attempts' causes, and whether it
    /// committed or was given up).
    pub fn add<A: Attempt>(&self, r: &Retried<A>) {
        self.transactions.fetch_add(1, Relaxed);
        self.attempts.fetch_add(u64::from(r.attempts), Relaxed);
        match r.answer().status {
            TxnStatus::Committed => self.committed.fetch_add(1, Relaxed),
            TxnStatus::Aborted(_) => self.failed.fetch_add(1, Relaxed),
            TxnStatus::Unknown(_) => 0,
        };
        for c in &r.aborts {
            self.causes[c.map_or(AbortCause::ALL.len(), AbortCause::index)].fetch_add(1, Relaxed);
        }
    }

    /// Aborted attempts counted so far.
    pub fn aborted_attempts(&self) -> u64 {
        self.causes.iter().map(|c| c.load(Relaxed)).sum()
    }

    /// The figures so far, of clients that retried at most `max_retries` times.
    pub fn report(&self, max_retries: u32) -> Retries {
        let [transactions, attempts, committed, failed] =
            [&self.transactions, &self.attempts, &self.committed, &self.failed].map(|c| c.load(Relaxed));
        let names = AbortCause::ALL.iter().map(|c| c.name()).chain([NO_CAUSE]);
        Retries {
            max_retries,
            attempts,
            retries: attempts.saturating_sub(transactions),
            failed,
            fail_rate: abort_rate(committed, failed),
            abort_causes: cause_counts(names, self.causes.iter().map(|c| c.load(Relaxed))),
        }
    }

    /// Clears every counter (end of a warm-up).
    pub fn reset(&self) {
        for c in [&self.transactions, &self.attempts, &self.committed, &self.failed].into_iter().chain(&self.causes) {
            c.store(0, Relaxed);
        }
    }
}

/// How long an embedded run measures its cluster's idle CPU by default
/// ([`CpuCost::idle_cpu_cores`]); zero turns the idle window off.
pub const DEFAULT_IDLE_WINDOW: Duration = Duration::from_secs(1);

/// What a run's measured interval cost in CPU time (user + system, every thread): an
/// embedded run's of its own process (clients, nodes, replay: everything), a run against a
/// running cluster's summed over the nodes' processes as their status reports it (not the
/// clients'). Reports hold it with `#[serde(flatten)]` after their [`Outcomes`] (JSON keys and
/// CSV columns `cpu_us_per_committed`, `cpu_cores`, `idle_cpu_cores`; null or empty when not
/// measured).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CpuCost {
    /// µs of CPU time per committed transaction over the measured interval; `None` when
    /// nothing committed or the CPU time could not be read.
    pub cpu_us_per_committed: Option<f64>,
    /// CPU seconds per wall-clock second of the measured interval: the cores busy on average;
    /// `None` when the CPU time could not be read.
    pub cpu_cores: Option<f64>,
    /// CPU seconds per wall-clock second over the idle window of an embedded run (the cluster
    /// up and loaded, no client running yet: heartbeats, replay, timers); `None` when no idle
    /// window ran (zero length, or a running cluster).
    pub idle_cpu_cores: Option<f64>,
}

impl CpuCost {
    /// The cost of `cpu` of CPU time (`None`: unreadable) over a measured interval of `wall`
    /// in which `committed` transactions committed, with the idle window's figure
    /// `idle_cpu_cores`.
    pub fn new(cpu: Option<Duration>, wall: Duration, committed: u64, idle_cpu_cores: Option<f64>) -> Self {
        CpuCost {
            cpu_us_per_committed: cpu.filter(|_| committed > 0).map(|c| c.as_secs_f64() * 1e6 / committed as f64),
            cpu_cores: cpu.map(|c| redt_coordinator::process::cores(c, wall)),
            idle_cpu_cores,
        }
    }

    /// The line the human-readable reports show, without a line break: µs per committed
    /// transaction, then the cores busy while measuring and while idle (`–` for what was
    /// not measured); its parts are [`CpuCost::cells`].
    pub fn line(&self) -> String {
        let (us, cores) = self.cells();
        format!("  CPU µs per committed txn   {us:>10}   ({cores})")
    }

    /// The parts of [`CpuCost::line`], for reports that lay their lines out otherwise: µs
    /// per committed transaction with one decimal (`412.5`), and the cores busy with two
    /// (`1.87 cores busy; idle 0.04`); `–` for a figure not measured, no idle part without
    /// an idle window.
    pub fn cells(&self) -> (String, String) {
        let or_dash = |x: Option<f64>, digits: usize| x.map_or_else(|| "–".to_string(), |x| format!("{x:.digits$}"));
        let idle = match self.idle_cpu_cores {
            Some(c) => format!("; idle {c:.2}"),
            None => String::new(),
        };
        (or_dash(self.cpu_us_per_committed, 1), format!("{} cores busy{idle}", or_dash(self.cpu_cores, 2)))
    }
}

/// Verbs per committed transaction, by kind.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct VerbsPerTxn {
    /// RDMA READs.
    pub read: f64,
    /// RDMA WRITEs.
    pub write: f64,
    /// Compare-and-swaps (plain).
    pub cas: f64,
    /// Fetch-and-adds (plain).
    pub faa: f64,
    /// Masked compare-and-swaps.
    pub masked_cas: f64,
    /// Masked fetch-and-adds.
    pub masked_faa: f64,
    /// Doorbells (batches and lone verbs): the round trips a NIC would make.
    pub doorbells: f64,
    /// Every verb.
    pub total: f64,
}

impl VerbsPerTxn {
    /// `counts` divided by `committed` (zero when nothing committed).
    pub fn new(counts: &VerbCounts, committed: u64) -> Self {
        let d = |x: u64| if committed == 0 { 0.0 } else { x as f64 / committed as f64 };
        VerbsPerTxn {
            read: d(counts.read),
            write: d(counts.write),
            cas: d(counts.cas),
            faa: d(counts.faa),
            masked_cas: d(counts.masked_cas),
            masked_faa: d(counts.masked_faa),
            doorbells: d(counts.doorbells),
            total: d(counts.total()),
        }
    }
}

/// MemStore bytes spent per record.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct MemStoreFootprint {
    /// Heap bytes per record (header, versions, padding, 64-byte allocation rounding).
    pub record_bytes: u64,
    /// Payload bytes per record (the cell values).
    pub payload_bytes: u64,
    /// Index bytes per record (the node's index area over the records it holds).
    pub index_bytes_per_record: f64,
    /// (record + index bytes) / payload bytes.
    pub bytes_per_payload_byte: f64,
}

impl MemStoreFootprint {
    /// Footprint of `records_per_node` records of `record_bytes` each with `payload_bytes`
    /// of values, and an index area of `index_bytes` per node.
    pub fn new(record_bytes: u64, payload_bytes: u64, index_bytes: u64, records_per_node: u64) -> Self {
        let idx = if records_per_node == 0 { 0.0 } else { index_bytes as f64 / records_per_node as f64 };
        MemStoreFootprint {
            record_bytes,
            payload_bytes,
            index_bytes_per_record: idx,
            bytes_per_payload_byte: (record_bytes as f64 + idx) / payload_bytes.max(1) as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_divide_by_the_interval_and_convert_latency_to_ms() {
        let mut h = Latency::histogram();
        h.record(2_000).unwrap();
        let o = Outcomes::new(30, 10, 5, Duration::from_secs(2), &h);
        assert_eq!((o.committed, o.aborted, o.unknown), (30, 10, 5));
        assert_eq!(o.committed_per_s, 15.0);
        assert_eq!(o.abort_rate, 0.25, "unknown outcomes are not aborts");
        assert!((o.latency_ms.p50 - 2.0).abs() < 0.01, "{:?}", o.latency_ms);
        assert_eq!(abort_rate(0, 0), 0.0);
        let [c, a, l] = o.lines();
        assert_eq!(c, "  committed/s                      15.0");
        assert_eq!(a, "  abort rate                     0.2500   (30 committed, 10 aborted, 5 unknown)");
        assert!(l.starts_with("  latency p50/p99/p999 ms       2.0 / 2.0 / 2.0"), "{l}");
    }

    #[test]
    fn cpu_cost_divides_by_commits_and_wall_time() {
        let c = CpuCost::new(Some(Duration::from_millis(3_000)), Duration::from_secs(2), 1_500, Some(0.25));
        assert_eq!(c.cpu_us_per_committed, Some(2_000.0));
        assert_eq!(c.cpu_cores, Some(1.5));
        assert_eq!(c.idle_cpu_cores, Some(0.25));
        assert_eq!(c.line(), "  CPU µs per committed txn       2000.0   (1.50 cores busy; idle 0.25)");
        // Nothing committed: the cores busy, but no cost per commit.
        let c = CpuCost::new(Some(Duration::from_secs(1)), Duration::from_secs(2), 0, None);
        assert_eq!((c.cpu_us_per_committed, c.cpu_cores), (None, Some(0.5)));
        assert_eq!(c.line(), "  CPU µs per committed txn            –   (0.50 cores busy)");
        // Unreadable (a node of a running cluster did not answer).
        let c = CpuCost::new(None, Duration::from_secs(2), 10, None);
        assert_eq!(c, CpuCost::default());
        assert_eq!(c.line(), "  CPU µs per committed txn            –   (– cores busy)");
    }

    #[test]
    fn flattened_cpu_cost_is_three_columns_empty_when_unmeasured() {
        #[derive(Serialize)]
        struct R {
            #[serde(flatten)]
            cpu: CpuCost,
        }
        let f = crate::csv::flatten(&R { cpu: CpuCost::default() }).unwrap();
        let cols: Vec<(&str, &str)> = f.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(cols, [("cpu_us_per_committed", ""), ("cpu_cores", ""), ("idle_cpu_cores", "")]);
        let r = R { cpu: CpuCost::new(Some(Duration::from_secs(1)), Duration::from_secs(1), 4, Some(0.5)) };
        let f = crate::csv::flatten(&r).unwrap();
        assert_eq!(f.iter().map(|(_, v)| v.as_str()).collect::<Vec<_>>(), ["250000", "1", "0.5"]);
    }

    #[test]
    fn flattened_outcomes_keep_the_report_keys_in_place() {
        #[derive(Serialize)]
        struct R {
            duration_s: f64,
            #[serde(flatten)]
            outcomes: Outcomes,
            after: u8,
        }
        let r = R { duration_s: 1.0, outcomes: Outcomes::default(), after: 1 };
        let cols: Vec<String> = crate::csv::flatten(&r).unwrap().into_iter().map(|(k, _)| k).collect();
        let want = [
            "duration_s",
            "committed",
            "aborted",
            "unknown",
            "committed_per_s",
            "abort_rate",
            "latency_ms.p50",
            "latency_ms.p99",
            "latency_ms.p999",
            "latency_ms.mean",
            "after",
        ];
        assert_eq!(cols, want);
    }

    fn retried(status: TxnStatus, aborts: Vec<Option<AbortCause>>) -> Retried {
        let attempts = aborts.len() as u32 + u32::from(!matches!(status, TxnStatus::Aborted(_)));
        let cause = if matches!(status, TxnStatus::Aborted(_)) { aborts.last().copied().flatten() } else { None };
        let last = redt_coordinator::TxnAnswer { txn: redt_proto::TxnId(1), status, cause, reads: vec![] };
        Retried { last, attempts, aborts }
    }

    #[test]
    fn retry_counts_split_attempts_from_transactions_and_aborts_by_cause() {
        use AbortCause::{LockConflict, Timeout, User};
        let c = RetryCounts::default();
        c.add(&retried(TxnStatus::Committed, vec![]));
        c.add(&retried(TxnStatus::Committed, vec![Some(LockConflict), Some(Timeout), Some(LockConflict)]));
        c.add(&retried(TxnStatus::Aborted("own".into()), vec![Some(LockConflict), Some(User)]));
        c.add(&retried(TxnStatus::Aborted("refused".into()), vec![None]));
        c.add(&retried(TxnStatus::Unknown("lost".into()), vec![Some(Timeout)]));
        let r = c.report(10);
        assert_eq!((r.max_retries, r.attempts, r.retries, r.failed), (10, 10, 5, 2));
        assert_eq!(r.fail_rate, 0.5, "2 given up of 2 committed and 2 failed; unknown outcomes are neither");
        let want: Vec<(String, u64)> =
            [("lock_conflict", 3), ("user", 1), ("timeout", 2), ("other", 1)].map(|(n, k)| (n.to_string(), k)).into();
        assert_eq!(r.abort_causes, want, "report order, the rest left out");
        assert_eq!(c.aborted_attempts(), 7);
        let lines = r.lines();
        assert_eq!(
            lines[0],
            "  fail rate                      0.5000   (2 given up; 10 attempts, 5 retries, at most 10 per txn)"
        );
        assert_eq!(lines[1], "  aborted attempts by cause  lock_conflict 3, user 1, timeout 2, other 1");
        c.reset();
        assert_eq!(c.report(0), Retries::default());
        assert_eq!(Retries::default().lines().len(), 1, "no cause line without aborts");
    }

    #[test]
    fn flattened_retries_are_six_columns_the_causes_in_one_cell() {
        let r = Retries {
            max_retries: 3,
            attempts: 9,
            retries: 2,
            failed: 1,
            fail_rate: 0.25,
            abort_causes: vec![("lock_conflict".into(), 2), ("timeout".into(), 1)],
        };
        let f = crate::csv::flatten(&r).unwrap();
        let cols: Vec<(&str, &str)> = f.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            cols,
            [
                ("max_retries", "3"),
                ("attempts", "9"),
                ("retries", "2"),
                ("failed", "1"),
                ("fail_rate", "0.25"),
                ("abort_causes", "lock_conflict=2; timeout=1")
            ]
        );
    }
}
