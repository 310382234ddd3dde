//! Durations on the command line (`--duration 30s`, `--warmup 500ms`): humantime's syntax,
//! with errors that say what is wrong and how to write it, and the run length refused when
//! zero (a run of 0 s measures nothing).

use std::time::Duration;

/// A length of time that may be zero (a warm-up, a fault's start or heal delay).
///
/// # Errors
/// Text naming the problem: a negative value, or one humantime cannot read.
pub(crate) fn span(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("'{s}' is negative: a duration is a length of time, e.g. 30s"));
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("'{s}' is not a duration ({e}): write a number and a unit, e.g. 30s, 500ms, 2m, 1h"))
}

/// A run length: as [`span`], and above zero.
///
/// # Errors
/// As [`span`], and zero.
pub(crate) fn run_time(s: &str) -> Result<Duration, String> {
    match span(s)? {
        d if d.is_zero() => Err(format!("'{s}' is zero: a run must last some time, e.g. 30s")),
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
        assert!(zero.contains("'0s' is zero"), "{zero}");
        let negative = span("-5s").unwrap_err();
        assert!(negative.contains("'-5s' is negative"), "{negative}");
        let junk = run_time("abc").unwrap_err();
        assert!(junk.contains("'abc' is not a duration") && junk.contains("e.g. 30s"), "{junk}");
    }
}
