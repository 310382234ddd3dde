//! Measures the failure detector's default configuration on simulated links: the false
//! suspicion rate over long traces and the detection time after a peer stops, for several
//! loss rates. Deterministic (seeded), no real time.
//!
//! ```text
//! cargo run --release -p redt-membership --example detector_fp [SEEDS] [TRIALS]
//! ```
//!
//! `SEEDS` one-hour traces per row (default 500; each watches both directions, so 2 peer-hours
//! per trace) and `TRIALS` stopped-peer runs per row (default 2000). membership/README.md
//! holds the figures it printed.

use redt_membership::{detection_time, false_suspicions, DetectorConfig, SimLink};
use std::time::{Duration, Instant};

/// Detection times in µs, up to an hour (3 significant digits: well under the ms the table
/// prints).
fn histogram(times: &[Duration]) -> hdrhistogram::Histogram<u64> {
    let mut h = hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds and precision");
    for t in times {
        h.saturating_record(u64::try_from(t.as_micros()).unwrap_or(u64::MAX));
    }
    h
}

fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1e3)
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>());
    let seeds = match args.next() {
        Some(Ok(n)) => n,
        None => 500,
        Some(Err(e)) => return eprintln!("SEEDS: {e}"),
    };
    let trials = match args.next() {
        Some(Ok(n)) => n,
        None => 2000,
        Some(Err(e)) => return eprintln!("TRIALS: {e}"),
    };
    let started = Instant::now();
    let links = [(40, 10, [0.01, 0.05, 0.10, 0.20, 0.30, 0.40].as_slice()), (300, 20, [0.01, 0.05].as_slice())];
    println!(
        "{:>6} {:>6} {:>5} {:>8} {:>8} {:>10} {:>11} {:>16} {:>8} {:>8} {:>8} {:>7}",
        "rtt_ms",
        "jit_ms",
        "loss",
        "int_ms",
        "tmo_ms",
        "peer_hrs",
        "heartbeats",
        "false_susp",
        "det_p50",
        "det_p99",
        "det_max",
        "missed"
    );
    for (rtt_ms, jitter_ms, losses) in links {
        for &loss in losses {
            let link = SimLink { rtt: Duration::from_millis(rtt_ms), jitter: Duration::from_millis(jitter_ms), loss };
            let config = DetectorConfig::for_link(link.rtt, link.jitter);
            let (mut peer_hours, mut heartbeats, mut suspicions) = (0.0, 0, 0);
            for seed in 0..seeds {
                let run = false_suspicions(link, config, Duration::from_secs(3600), seed);
                peer_hours += run.peer_hours;
                heartbeats += run.heartbeats;
                suspicions += run.suspicions;
            }
            let mut times = Vec::new();
            let mut missed = 0;
            for seed in 0..trials {
                match detection_time(link, config, Duration::from_secs(2), 1_000_000 + seed) {
                    Some(t) => times.push(t),
                    None => missed += 1,
                }
            }
            let h = histogram(&times);
            let quantile = |q: f64| Duration::from_micros(h.value_at_quantile(q));
            println!(
                "{:>6} {:>6} {:>4}% {:>8} {:>8} {:>10.0} {:>11} {:>16} {:>8} {:>8} {:>8} {:>7}",
                rtt_ms,
                jitter_ms,
                loss * 100.0,
                ms(config.interval),
                ms(config.timeout),
                peer_hours,
                heartbeats,
                format!("{suspicions} ({:.3}/h)", suspicions as f64 / peer_hours.max(f64::MIN_POSITIVE)),
                ms(quantile(0.50)),
                ms(quantile(0.99)),
                ms(times.iter().max().copied().unwrap_or_default()),
                missed
            );
        }
    }
    println!(
        "false_susp: suspicions of a live peer (count, per peer-hour); det_*: time from the peer's stop to its \
         suspicion, ms; missed: trials with a false suspicion in the 2 s warmup or no detection; {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
