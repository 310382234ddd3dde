//! The optional `timeouts:` section of a topology file: its raw shape and its checks (each
//! value on its own; the orderings between values need the topology-derived defaults and are
//! checked where a node resolves them, `redt_coordinator::NodeTimeouts::resolve`).

use super::{parse_duration, Res, Resolver, Text};
use crate::topology::{DetectorTimeoutsConfig, RecoveryTimeoutsConfig, TimeoutsConfig};
use serde::Deserialize;
use std::time::Duration;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTimeouts {
    phase1_timeout: Option<Text>,
    clock_skew_bound: Option<Text>,
    retry_every: Option<Text>,
    retry_max: Option<Text>,
    give_up_after: Option<Text>,
    lock_wait: Option<Text>,
    #[serde(default)]
    recovery: RawRecoveryTimeouts,
    #[serde(default)]
    detector: RawDetectorTimeouts,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDetectorTimeouts {
    interval: Option<Text>,
    timeout: Option<Text>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRecoveryTimeouts {
    own_dc_after: Option<Text>,
    other_dc_after: Option<Text>,
    turn: Option<Text>,
    round_timeout: Option<Text>,
    retry_base: Option<Text>,
    retry_max: Option<Text>,
    scan_every: Option<Text>,
    gap_wait: Option<Text>,
    catch_up_give_up: Option<Text>,
}

impl Resolver<'_> {
    /// Parses and checks the `timeouts` section: every value set is a duration above zero
    /// (`clock_skew_bound` may be zero: clocks of one host agree; `lock_wait` too: No-Wait)
    /// and at most
    /// [`TimeoutsConfig::MAX`].
    pub(super) fn timeouts(&self, raw: &RawTimeouts) -> Res<TimeoutsConfig> {
        let r = &raw.recovery;
        let recovery = RecoveryTimeoutsConfig {
            own_dc_after: self.timeout("recovery.own_dc_after", &r.own_dc_after, false)?,
            other_dc_after: self.timeout("recovery.other_dc_after", &r.other_dc_after, false)?,
            turn: self.timeout("recovery.turn", &r.turn, false)?,
            round_timeout: self.timeout("recovery.round_timeout", &r.round_timeout, false)?,
            retry_base: self.timeout("recovery.retry_base", &r.retry_base, false)?,
            retry_max: self.timeout("recovery.retry_max", &r.retry_max, false)?,
            scan_every: self.timeout("recovery.scan_every", &r.scan_every, false)?,
            gap_wait: self.timeout("recovery.gap_wait", &r.gap_wait, false)?,
            catch_up_give_up: self.timeout("recovery.catch_up_give_up", &r.catch_up_give_up, false)?,
        };
        let d = &raw.detector;
        let detector = DetectorTimeoutsConfig {
            interval: self.timeout("detector.interval", &d.interval, false)?,
            timeout: self.timeout("detector.timeout", &d.timeout, false)?,
        };
        Ok(TimeoutsConfig {
            phase1_timeout: self.timeout("phase1_timeout", &raw.phase1_timeout, false)?,
            clock_skew_bound: self.timeout("clock_skew_bound", &raw.clock_skew_bound, true)?,
            retry_every: self.timeout("retry_every", &raw.retry_every, false)?,
            retry_max: self.timeout("retry_max", &raw.retry_max, false)?,
            give_up_after: self.timeout("give_up_after", &raw.give_up_after, false)?,
            lock_wait: self.timeout("lock_wait", &raw.lock_wait, true)?,
            recovery,
            detector,
        })
    }

    /// One timeout at `timeouts.{key}`, if set.
    fn timeout(&self, key: &str, raw: &Option<Text>, zero_ok: bool) -> Res<Option<Duration>> {
        self.bounded_duration(&format!("timeouts.{key}"), raw, zero_ok)
    }

    /// One duration at the YAML path `path`, if set: zero only if `zero_ok`, at most
    /// [`TimeoutsConfig::MAX`] (every timeout of the file, the `verbs` section's included).
    pub(super) fn bounded_duration(&self, path: &str, raw: &Option<Text>, zero_ok: bool) -> Res<Option<Duration>> {
        let Some(text) = raw else { return Ok(None) };
        let field = || path.to_string();
        let d = self.at(field, parse_duration(&text.0))?;
        if d.is_zero() && !zero_ok {
            return Err(self.invalid(field(), "must be above zero"));
        }
        if d > TimeoutsConfig::MAX {
            return Err(self.invalid(
                field(),
                format!(
                    "{} is more than {}, the largest timeout allowed",
                    humantime::format_duration(d),
                    humantime::format_duration(TimeoutsConfig::MAX)
                ),
            ));
        }
        Ok(Some(d))
    }
}
