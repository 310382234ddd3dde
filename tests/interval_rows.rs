//! `redt bench … --interval`: the interval rows written with `--interval-csv` come
//! from the run's own counters, so their committed counts add up to the report's.

mod common;
use std::process::Command;

/// Runs `redt bench ARGS --json --interval 200ms --interval-csv F` and returns the report
/// and the CSV rows (header first).
fn bench_with_rows(args: &[&str]) -> (serde_json::Value, Vec<Vec<String>>) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let csv = dir.path().join("rows.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_redt"))
        .args(["bench"])
        .args(args)
        .args(["--json", "--interval", "200ms", "--interval-csv"])
        .arg(&csv)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("redt runs");
    assert!(out.status.success(), "redt bench failed: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json prints JSON only");
    let text = std::fs::read_to_string(&csv).expect("the rows' file");
    let rows = text.lines().map(|l| l.split(',').map(str::to_string).collect()).collect();
    (report, rows)
}

/// The column `name` of `rows` (header first) as numbers.
fn column(rows: &[Vec<String>], name: &str) -> Vec<f64> {
    let i = rows[0].iter().position(|c| c == name).unwrap_or_else(|| panic!("no column {name}: {:?}", rows[0]));
    rows[1..].iter().map(|r| r[i].parse().expect("a number")).collect()
}

#[test]
fn ycsb_interval_rows_add_up_to_the_report() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/local-fast.yaml");
    let (report, rows) = bench_with_rows(&[
        "ycsb",
        "--config",
        config,
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--records-per-partition",
        "1000",
    ]);
    let committed = column(&rows, "committed");
    assert!(committed.len() >= 8, "2 s at 200 ms: {} rows", committed.len());
    assert_eq!(committed.iter().sum::<f64>() as u64, report["committed"].as_u64().unwrap());
    assert_eq!(column(&rows, "aborted").iter().sum::<f64>() as u64, report["aborted"].as_u64().unwrap());
    let totals = column(&rows, "committed_total");
    assert_eq!(*totals.last().unwrap() as u64, report["committed"].as_u64().unwrap());
    assert!(totals.windows(2).all(|w| w[0] <= w[1]), "running totals: {totals:?}");
    let elapsed = column(&rows, "elapsed_s");
    assert!((elapsed.last().unwrap() - report["duration_s"].as_f64().unwrap()).abs() < 1e-6, "{elapsed:?}");
    let p99 = column(&rows, "p99_ms");
    assert!(committed.iter().zip(&p99).all(|(&c, &p)| (c > 0.0) == (p > 0.0)), "a latency where commits are");
}

/// Sums `names` of the CSV rows.
fn total(rows: &[Vec<String>], names: &[&str]) -> u64 {
    names.iter().map(|n| column(rows, n).iter().sum::<f64>() as u64).sum()
}

#[test]
fn append_interval_rows_count_every_transaction_of_the_history() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/local-fast.yaml");
    let (report, rows) = bench_with_rows(&["append", "--config", config, "--duration", "2s"]);
    assert!(rows.len() > 8, "2 s at 200 ms: {} rows", rows.len() - 1);
    // The rows cover the whole run (no warm-up): the ok and info transactions of the history
    // and every aborted attempt (a fail is the last one of its transaction).
    assert_eq!(total(&rows, &["committed"]), report["committed"].as_u64().unwrap(), "{report}");
    assert_eq!(total(&rows, &["aborted"]), report["aborted"].as_u64().unwrap(), "{report}");
    assert_eq!(total(&rows, &["unknown"]), report["unknown"].as_u64().unwrap(), "{report}");
}

#[test]
fn tpcc_interval_rows_count_the_database_transactions() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = dir.path().join("tpcc-local.yaml");
    std::fs::write(&config, common::tpcc_local_yaml("interval-tpcc", 7780)).unwrap();
    let (report, rows) = bench_with_rows(&[
        "tpcc",
        "--config",
        config.to_str().unwrap(),
        "--warehouses",
        "1",
        "--scale",
        "100,30,9",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
    ]);
    assert!(rows.len() > 8, "2 s at 200 ms: {} rows", rows.len() - 1);
    // Every attempt of the measured interval (a Delivery is ten), as the per-type figures count them.
    let attempts: u64 = report["types"].as_array().unwrap().iter().map(|t| t["attempts"].as_u64().unwrap()).sum();
    assert_eq!(total(&rows, &["committed", "aborted", "unknown"]), attempts, "{report}");
    assert!(total(&rows, &["committed"]) > 0);
}

#[test]
fn a_zero_interval_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_redt"))
        .args(["bench", "local", "--interval", "0s"])
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("redt runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`0s`: zero") && err.contains("--no-interval"), "{err}");
}
