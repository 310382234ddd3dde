//! Flags every bench shares: where its report goes (`--json`, `--csv`, the interval rows) and
//! the idle-CPU window of the embedded benches.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// Output options shared by every bench.
#[derive(Args, Debug, Clone)]
pub struct OutArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Append the report as one row to this CSV file (header written when the file is new).
    #[arg(long, value_name = "FILE")]
    pub(crate) csv: Option<PathBuf>,
    /// Print a row per interval of the measured run (not the warm-up): elapsed,
    /// committed/s, aborts/s, p50/p95/p99 ms of the interval, totals [default: 1s when
    /// standard output is a terminal and without --json, else no rows]. Above zero; turn
    /// the rows off with --no-interval.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = interval_length)]
    pub(crate) interval: Option<Duration>,
    /// No interval rows, even on a terminal.
    #[arg(long, conflicts_with_all = ["interval", "interval_csv"])]
    pub(crate) no_interval: bool,
    /// Write the interval rows to this CSV file (created or truncated; header `elapsed_s,
    /// interval_s, committed, aborted, unknown, committed_per_s, aborted_per_s, p50_ms, p95_ms,
    /// p99_ms, committed_total, aborted_total`), every --interval [default: 1s]. `--csv`
    /// keeps one row per run.
    #[arg(long, value_name = "FILE")]
    pub(crate) interval_csv: Option<PathBuf>,
}

/// `--interval`: a duration above zero; 0 is refused, pointing at `--no-interval`.
fn interval_length(s: &str) -> Result<Duration, String> {
    match crate::cmd::duration::span(s)? {
        d if d.is_zero() => Err(format!(
            "invalid duration `{}`: zero; an interval must last some time, e.g. 1s (--no-interval turns the rows off)",
            s.trim()
        )),
        d => Ok(d),
    }
}

impl OutArgs {
    /// The interval rows asked for: `--interval` (or 1 s) when given, or with
    /// `--interval-csv`, or by default when standard output is a terminal and `--json` is not
    /// given; none with `--no-interval`. Rows print unless only `--interval-csv` asked for
    /// them, to standard error with `--json`.
    pub(crate) fn intervals(&self) -> redt_bench::interval::IntervalOptions {
        use std::io::IsTerminal;
        let by_default = std::io::stdout().is_terminal() && !self.json;
        let print = !self.no_interval && (self.interval.is_some() || (by_default && self.interval_csv.is_none()));
        let on = print || (!self.no_interval && self.interval_csv.is_some());
        redt_bench::interval::IntervalOptions {
            every: on.then(|| self.interval.unwrap_or(Duration::from_secs(1))),
            print,
            to_stderr: self.json,
            csv: self.interval_csv.clone(),
        }
    }

    /// Whether `--interval` or `--interval-csv` was given (for the runs that have no rows).
    pub(crate) fn asked_for_intervals(&self) -> bool {
        self.interval.is_some() || self.interval_csv.is_some()
    }

    /// Whether `--json` was given.
    pub(crate) fn json(&self) -> bool {
        self.json
    }

    /// Prints the report — its JSON text `json` with `--json`, else `table()` — then
    /// appends it to the CSV file if asked.
    pub(crate) fn emit(&self, json: String, table: impl FnOnce()) -> Result<()> {
        if self.json {
            println!("{json}");
        } else {
            table();
        }
        if let Some(path) = &self.csv {
            redt_bench::csv::append_json(path, &json).map_err(anyhow::Error::msg)?;
            if !self.json {
                println!("  (row appended to {})", path.display());
            }
        }
        Ok(())
    }
}

/// The idle-CPU window of the embedded benches (`idle_cpu_cores` in their reports).
#[derive(Args, Debug, Clone, Copy)]
pub struct IdleArgs {
    /// Before the warm-up, with the embedded cluster up and loaded and no client running yet,
    /// measure the process's idle CPU over this window (`idle_cpu_cores`: heartbeats, replay,
    /// timers); `0s` skips it [default: 1s].
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::cmd::duration::span)]
    pub(crate) idle_window: Option<Duration>,
}

impl IdleArgs {
    /// `--idle-window`, or the default.
    pub(crate) fn window(&self) -> Duration {
        self.idle_window.unwrap_or(redt_bench::report::DEFAULT_IDLE_WINDOW)
    }

    /// Whether `--idle-window` was given.
    pub(crate) fn given(&self) -> bool {
        self.idle_window.is_some()
    }
}
