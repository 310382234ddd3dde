//! Per-interval rows of a bench run (`--interval 1s`): every interval, the
//! committed, aborted and unknown transactions of that interval, per second, and the
//! p50/p95/p99 latency of the interval's commits in ms, beside the running totals.
//!
//! A row is the difference of two [`Snapshot`]s of the same counters and latency histogram
//! the final report reads, so the rows of a run add up to its report: the last row runs from
//! the last full interval to the end of the measured interval. Rows cover the measured
//! interval only, never the warm-up (the counters are reset, or counting starts, when it
//! ends).

use crate::report::Latency;
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// What to do with interval rows; [`IntervalOptions::default`] is off.
#[derive(Clone, Debug, Default)]
pub struct IntervalOptions {
    /// Length of one interval (above zero); `None`: no rows.
    pub every: Option<Duration>,
    /// Print each row as it completes (through the progress bar, so the bar is not
    /// garbled): on standard output, or standard error when `to_stderr`.
    pub print: bool,
    /// Print to standard error instead of standard output (when standard output carries
    /// `--json`).
    pub to_stderr: bool,
    /// Write the rows to this CSV file (created, or truncated), one line per row with a
    /// header (the columns of [`IntervalRow`]).
    pub csv: Option<PathBuf>,
}

/// The cumulative figures of a run's measured interval at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Time since the measured interval started.
    pub at: Duration,
    /// Committed transactions so far.
    pub committed: u64,
    /// Aborted transactions so far.
    pub aborted: u64,
    /// Transactions whose outcome stayed unknown so far.
    pub unknown: u64,
    /// Latencies of the committed transactions so far, in µs.
    pub latency_us: Histogram<u64>,
}

impl Snapshot {
    /// The snapshot at the start of a measured interval: nothing counted.
    pub fn zero() -> Self {
        Snapshot { at: Duration::ZERO, committed: 0, aborted: 0, unknown: 0, latency_us: Latency::histogram() }
    }
}

/// One interval's figures (one printed row, one CSV line).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IntervalRow {
    /// End of the interval, in seconds since the measured interval started.
    pub elapsed_s: f64,
    /// Length of the interval, in seconds.
    pub interval_s: f64,
    /// Transactions committed in the interval.
    pub committed: u64,
    /// Transactions aborted in the interval.
    pub aborted: u64,
    /// Transactions whose outcome stayed unknown, in the interval.
    pub unknown: u64,
    /// `committed` per second of the interval.
    pub committed_per_s: f64,
    /// `aborted` per second of the interval.
    pub aborted_per_s: f64,
    /// Median latency of the interval's commits, in ms (0 when none committed).
    pub p50_ms: f64,
    /// 95th percentile latency of the interval's commits, in ms.
    pub p95_ms: f64,
    /// 99th percentile latency of the interval's commits, in ms.
    pub p99_ms: f64,
    /// Committed transactions since the measured interval started.
    pub committed_total: u64,
    /// Aborted transactions since the measured interval started.
    pub aborted_total: u64,
}

impl IntervalRow {
    /// The row of the interval from `prev` to `cur` (`cur` taken later, from the same
    /// counters: every count at least `prev`'s).
    pub fn between(prev: &Snapshot, cur: &Snapshot) -> Self {
        let secs = cur.at.saturating_sub(prev.at).as_secs_f64();
        let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        let mut h = cur.latency_us.clone();
        // A histogram read before `prev` holds no more than one read after it; should the
        // two come from different sources, the interval's own values are unknown: zero.
        if h.subtract(&prev.latency_us).is_err() {
            h.reset();
        }
        let ms = |q: f64| if h.is_empty() { 0.0 } else { h.value_at_quantile(q) as f64 / 1e3 };
        let committed = cur.committed.saturating_sub(prev.committed);
        let aborted = cur.aborted.saturating_sub(prev.aborted);
        IntervalRow {
            elapsed_s: cur.at.as_secs_f64(),
            interval_s: secs,
            committed,
            aborted,
            unknown: cur.unknown.saturating_sub(prev.unknown),
            committed_per_s: per_s(committed),
            aborted_per_s: per_s(aborted),
            p50_ms: ms(0.5),
            p95_ms: ms(0.95),
            p99_ms: ms(0.99),
            committed_total: cur.committed,
            aborted_total: cur.aborted,
        }
    }

    /// The printed header, aligned with [`IntervalRow::line`].
    pub fn header() -> String {
        format!(
            "{:>8} {:>12} {:>10} {:>9} {:>9} {:>9} {:>11} {:>9}",
            "_elapsed", "committed/s", "aborts/s", "p50(ms)", "p95(ms)", "p99(ms)", "committed", "aborted"
        )
    }

    /// The row as printed: elapsed, committed/s, aborts/s, p50/p95/p99 ms, totals.
    pub fn line(&self) -> String {
        format!(
            "{:>7.2}s {:>12.1} {:>10.1} {:>9.2} {:>9.2} {:>9.2} {:>11} {:>9}",
            self.elapsed_s,
            self.committed_per_s,
            self.aborted_per_s,
            self.p50_ms,
            self.p95_ms,
            self.p99_ms,
            self.committed_total,
            self.aborted_total
        )
    }
}

/// A run's interval rows in the making: the driver asks [`Intervals::due`] in its loop,
/// passes a [`Snapshot`] to [`Intervals::take`] when due and the run is not over, and the
/// final one to [`Intervals::finish`] (so the last row, possibly shorter than an interval,
/// ends where the report does).
pub struct Intervals {
    every: Duration,
    print: bool,
    to_stderr: bool,
    csv: Option<(PathBuf, csv::Writer<std::fs::File>)>,
    prev: Snapshot,
    next: Duration,
    rows: u64,
}

impl Intervals {
    /// Starts the rows of a measured interval starting now; `None` when `opts` asks for none.
    ///
    /// # Errors
    /// An interval of zero; a CSV file that cannot be created.
    pub fn start(opts: &IntervalOptions) -> Result<Option<Intervals>, String> {
        let Some(every) = opts.every else { return Ok(None) };
        if every.is_zero() {
            return Err("an interval must be above zero".into());
        }
        let csv = match &opts.csv {
            Some(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                }
                let w = csv::Writer::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
                Some((path.clone(), w))
            }
            None => None,
        };
        Ok(Some(Intervals {
            every,
            print: opts.print,
            to_stderr: opts.to_stderr,
            csv,
            prev: Snapshot::zero(),
            next: every,
            rows: 0,
        }))
    }

    /// Whether an interval has ended by `elapsed` (since the measured interval started).
    pub fn due(&self, elapsed: Duration) -> bool {
        elapsed >= self.next
    }

    /// Ends the current interval at `snap` (its row printed above `bar` and written to the
    /// CSV file); the next ends one interval after the one just ended (or after `snap`, if
    /// the driver fell behind by more than an interval).
    ///
    /// # Errors
    /// A CSV write error.
    pub fn take(&mut self, snap: Snapshot, bar: &ProgressBar) -> Result<(), String> {
        self.next = (self.next + self.every).max(snap.at);
        self.emit(snap, bar)
    }

    /// Ends the last interval at `snap`, the figures the report is made of (a row if any time
    /// passed since the last one), and flushes the CSV file.
    ///
    /// # Errors
    /// A CSV write error.
    pub fn finish(mut self, snap: Snapshot, bar: &ProgressBar) -> Result<(), String> {
        if snap.at > self.prev.at || snap.committed + snap.aborted + snap.unknown > self.rows_total() {
            self.emit(snap, bar)?;
        }
        if let Some((path, w)) = &mut self.csv {
            w.flush().map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(())
    }

    /// Transactions counted up to the last row.
    fn rows_total(&self) -> u64 {
        self.prev.committed + self.prev.aborted + self.prev.unknown
    }

    fn emit(&mut self, snap: Snapshot, bar: &ProgressBar) -> Result<(), String> {
        let row = IntervalRow::between(&self.prev, &snap);
        self.prev = snap;
        if self.print {
            let first = self.rows == 0;
            let to_stderr = self.to_stderr;
            bar.suspend(|| {
                let text = if first { format!("{}\n{}", IntervalRow::header(), row.line()) } else { row.line() };
                if to_stderr {
                    eprintln!("{text}");
                } else {
                    println!("{text}");
                }
            });
        }
        if let Some((path, w)) = &mut self.csv {
            w.serialize(&row).map_err(|e| format!("{}: {e}", path.display()))?;
            w.flush().map_err(|e| format!("{}: {e}", path.display()))?;
        }
        self.rows += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(at_ms: u64, committed: u64, aborted: u64, latencies_us: &[u64]) -> Snapshot {
        let mut h = Latency::histogram();
        for &l in latencies_us {
            h.record(l).unwrap();
        }
        Snapshot { at: Duration::from_millis(at_ms), committed, aborted, unknown: 0, latency_us: h }
    }

    #[test]
    fn a_row_is_the_difference_of_two_snapshots() {
        // 100 commits at 10 ms in the first second, then 50 more at 40 ms in half a second.
        let first: Vec<u64> = vec![10_000; 100];
        let mut both = first.clone();
        both.extend(vec![40_000; 50]);
        let a = snap(1_000, 100, 4, &first);
        let b = snap(1_500, 150, 9, &both);
        let r = IntervalRow::between(&a, &b);
        assert_eq!((r.committed, r.aborted, r.committed_total, r.aborted_total), (50, 5, 150, 9));
        assert_eq!((r.elapsed_s, r.interval_s), (1.5, 0.5));
        assert_eq!((r.committed_per_s, r.aborted_per_s), (100.0, 10.0));
        // Only the interval's own latencies: 40 ms, not the first second's 10 ms.
        for p in [r.p50_ms, r.p95_ms, r.p99_ms] {
            assert!((p - 40.0).abs() < 0.1, "{r:?}");
        }
        let first_row = IntervalRow::between(&Snapshot::zero(), &a);
        assert_eq!((first_row.committed, first_row.committed_per_s), (100, 100.0));
        assert!((first_row.p99_ms - 10.0).abs() < 0.1, "{first_row:?}");
        // An interval with no commits has zero latency, not the run's.
        let idle = IntervalRow::between(&b, &snap(2_000, 150, 9, &both));
        assert_eq!((idle.committed, idle.p50_ms, idle.committed_per_s), (0, 0.0, 0.0));
    }

    #[test]
    fn rows_go_to_the_csv_file_and_add_up_to_the_last_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.csv");
        let opts = IntervalOptions {
            every: Some(Duration::from_secs(1)),
            print: false,
            to_stderr: false,
            csv: Some(path.clone()),
        };
        let mut iv = Intervals::start(&opts).unwrap().unwrap();
        let bar = ProgressBar::hidden();
        assert!(!iv.due(Duration::from_millis(999)) && iv.due(Duration::from_secs(1)));
        iv.take(snap(1_000, 10, 1, &[5_000; 10]), &bar).unwrap();
        assert!(!iv.due(Duration::from_millis(1_999)) && iv.due(Duration::from_secs(2)));
        iv.take(snap(2_000, 25, 1, &[5_000; 25]), &bar).unwrap();
        iv.finish(snap(2_300, 27, 2, &[5_000; 27]), &bar).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("elapsed_s,interval_s,committed,aborted,unknown,committed_per_s"), "{text}");
        let committed: u64 = lines[1..].iter().map(|l| l.split(',').nth(2).unwrap().parse::<u64>().unwrap()).sum();
        assert_eq!(committed, 27);
        let zero = IntervalOptions { every: Some(Duration::ZERO), ..Default::default() };
        assert!(matches!(Intervals::start(&zero), Err(e) if e.contains("above zero")));
        assert!(matches!(Intervals::start(&IntervalOptions::default()), Ok(None)));
    }
}
