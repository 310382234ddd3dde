//! Prints measured RTTs for a few configured values; run with
//! `cargo test -p redt-netem --test rtt_report -- --ignored --nocapture`.

use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints a report; no assertions on timing"]
async fn report_measured_rtts() {
    for ms in [10, 40, 100] {
        let r = redt_netem::measure_rtt(Duration::from_millis(ms), 20).await.unwrap();
        println!(
            "configured {:>6.1} ms: p50 {:>7.3} ms  p99 {:>7.3} ms  mean {:>7.3} ms  ({} samples)",
            r.configured_ms, r.p50_ms, r.p99_ms, r.mean_ms, r.samples
        );
    }
}
