//! Drills on real node processes (`redt drill`): `redt cluster up` runs a
//! copy of `configs/local-fast.yaml` (4 processes, 2 ms RTT); `redt bench ycsb --cluster
//! --drill "kill-node … restart-after …"` kills one node process with SIGKILL under the
//! bench's clients and starts it again; the timeline CSV has a row per 100 ms with the kill
//! and the restart marked, and every key an acknowledged commit wrote reads back at an
//! allowed value (0 acknowledged commits lost). `redt drill` then runs a slow link on its own
//! and saves its outputs; a plan naming an unknown DC is refused naming it. No timing is
//! asserted.

mod common;
use common::{cluster_up, local_fast_yaml, path_str, redt, text, ClusterGuard};
use std::path::Path;

/// Listen port of this test's cluster (cluster_processes.rs uses 7640–7680).
const PORT: u16 = 7720;

#[test]
fn a_kill_drill_under_the_bench_loses_no_acknowledged_commit() {
    let work = tempfile::tempdir().expect("a temporary directory");
    let shm = if Path::new("/dev/shm").is_dir() { tempfile::tempdir_in("/dev/shm") } else { tempfile::tempdir() }
        .expect("a temporary MemStore directory");
    let yaml = local_fast_yaml(&format!("drill-processes-{}", std::process::id()), PORT);
    let config = work.path().join("local-fast-drill.yaml");
    std::fs::write(&config, yaml).unwrap();
    let run_dir = work.path().join("run");
    let certs = run_dir.join("certs");
    let _guard = ClusterGuard::new(run_dir.clone());
    let out = cluster_up(&config, &run_dir, 500, shm.path(), &[]);
    assert!(out.status.success(), "redt cluster up: {}", text(&out));

    // The bench under a one-event plan: dc3-n1 killed 1.5 s into the 5 s measured run and
    // started again 1.5 s later.
    let csv = work.path().join("timeline.csv");
    let out = redt(&[
        "bench",
        "ycsb",
        "--cluster",
        path_str(&config),
        "--certs",
        path_str(&certs),
        "--run-dir",
        path_str(&run_dir),
        "--records-per-partition",
        "500",
        "--clients-per-node",
        "2",
        "--warmup",
        "1s",
        "--duration",
        "5s",
        "--drill",
        "kill-node dc3-n1 at 1500ms restart-after 1500ms",
        "--timeline-csv",
        path_str(&csv),
        "--json",
    ]);
    assert!(out.status.success(), "redt bench ycsb --drill (lost commits or failed effects fail it): {}", text(&out));
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("--json: {e}: {}", text(&out)));
    let drill = &report["drill"];
    assert_eq!(drill["plan"], "kill-node dc3-n1 at 1500ms restart-after 1500ms");
    let event = &drill["events"][0];
    assert!(event["injected_at_s"].is_number() && event["healed_at_s"].is_number(), "injected and healed: {event}");
    assert_eq!(event["errors"], serde_json::json!([]), "{event}");
    let log: Vec<&str> = drill["log"].as_array().unwrap().iter().filter_map(|l| l["text"].as_str()).collect();
    assert!(log.iter().any(|l| l.contains("killed dc3-n1 (pid")), "{log:?}");
    assert!(log.iter().any(|l| l.contains("started dc3-n1 again (pid")), "{log:?}");
    let lost = &drill["lost"];
    println!("acknowledged-commits check: {lost}");
    assert!(lost["writes_acked"].as_u64() > Some(0), "some writes were acknowledged: {lost}");
    assert!(lost["keys_read"].as_u64() > Some(0), "keys were read back: {lost}");
    assert_eq!(lost["keys_unreadable"], 0, "every key was read back: {lost}");
    assert_eq!(lost["lost"], 0, "no acknowledged commit lost: {lost}");
    assert_eq!(lost["aborted_visible"], 0, "no aborted write visible: {lost}");
    assert_eq!(drill["locks_left"], 0, "{drill}");
    assert_eq!(drill["undecided_left"], 0, "{drill}");
    assert_eq!(drill["seconds"].as_array().map(Vec::len), Some(5), "one row per second");

    // The timeline: one row per 100 ms, the kill and the restart marked.
    let timeline = std::fs::read_to_string(&csv).expect("the timeline CSV");
    let mut rows = timeline.lines();
    assert_eq!(
        rows.next(),
        Some("t_s,committed_per_s,aborted_per_s,unknown_per_s,p99_ms,undecided,backlog,suspected,events")
    );
    let rows: Vec<&str> = rows.collect();
    assert_eq!(rows.len(), 50, "5 s in 100 ms rows");
    let marked: Vec<&str> = rows.iter().filter_map(|r| r.rsplit(',').next()).filter(|e| !e.is_empty()).collect();
    assert_eq!(marked, ["kill-node dc3-n1", "heal kill-node dc3-n1"], "{timeline}");
    let committed: f64 = rows.iter().map(|r| r.split(',').nth(1).unwrap().parse::<f64>().unwrap()).sum();
    assert!(committed > 0.0, "commits in the timeline");

    // `redt drill` on its own: a slow link, its outputs in one directory.
    let out_dir = work.path().join("drill-out");
    let out = redt(&[
        "drill",
        "slow-link dc1 dc2 rtt 20ms at 0s for 500ms",
        "--run-dir",
        path_str(&run_dir),
        "--duration",
        "1500ms",
        "--out",
        path_str(&out_dir),
    ]);
    assert!(out.status.success(), "redt drill: {}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("rtt dc1 -> dc2 set to 20ms") && stdout.contains("rtt dc2 -> dc1 set to 2ms"), "{stdout}");
    assert!(stdout.contains("full replication restored    n/a (no placement change"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["events"][0]["event"], "slow-link dc1 dc2 rtt 20ms at 0s for 500ms");
    assert_eq!(std::fs::read_to_string(out_dir.join("timeline.csv")).unwrap().lines().count(), 16);

    // A plan naming a DC the topology does not have is refused before anything runs.
    let out = redt(&["drill", "kill-dc dc9 at 1s", "--run-dir", path_str(&run_dir)]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`dc9`: no DC of that name"), "{}", text(&out));
}
