//! Durations on the command line (`--duration 30s`, `--warmup 500ms`, `netem set --rtt`,
//! `--phase1-timeout`, `--valid-for`, …): one parser for all of them and for the topology
//! file, [`redt_proto::parse_duration`] (humantime's syntax, negatives refused, errors that
//! say how to write one), and the run length refused when zero (a run of 0 s measures
//! nothing). Every flag that takes one sets `allow_hyphen_values`, so `-5s` reaches the parser
//! instead of being read as a flag `-5`.

use std::time::Duration;

/// A length of time that may be zero (a warm-up, a fault's start or heal delay).
///
/// # Errors
/// Text naming the problem: a negative value, or one humantime cannot read.
pub(crate) fn span(s: &str) -> Result<Duration, String> {
    redt_proto::parse_duration(s)
}

/// A run length: as [`span`], and above zero.
///
/// # Errors
/// As [`span`], and zero.
pub(crate) fn run_time(s: &str) -> Result<Duration, String> {
    match span(s)? {
        d if d.is_zero() => Err(format!("invalid duration `{}`: zero; a run must last some time, e.g. 30s", s.trim())),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_durations_are_named_and_explained() {
        assert_eq!(span("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(span("0s"), Ok(Duration::ZERO));
        assert_eq!(run_time("500ms"), Ok(Duration::from_millis(500)));
        let zero = run_time("0s").unwrap_err();
        assert!(zero.contains("`0s`: zero; a run must last some time"), "{zero}");
        let negative = span("-5s").unwrap_err();
        assert!(negative.contains("`-5s`: negative"), "{negative}");
        let junk = run_time("abc").unwrap_err();
        assert!(junk.contains("`abc`: not a number and a unit") && junk.contains("e.g. 30s"), "{junk}");
    }
}
