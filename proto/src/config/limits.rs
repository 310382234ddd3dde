//! The optional `limits:` section of a topology file: its raw shape and its checks. Every key
//! is optional; one left out keeps its [`LimitsConfig`] default.

use super::{parse_size, Res, Resolver, Text};
use crate::topology::LimitsConfig;
use serde::Deserialize;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    #[serde(default)]
    max_ops_per_txn: Option<Text>,
    #[serde(default)]
    max_bytes_per_txn: Option<Text>,
    #[serde(default)]
    max_jsonl_line_bytes: Option<Text>,
    #[serde(default)]
    max_pending_votes: Option<Text>,
    #[serde(default)]
    max_accepted_redo: Option<Text>,
    #[serde(default)]
    max_background_retries: Option<Text>,
    #[serde(default)]
    max_bulk_percent: Option<Text>,
    #[serde(default)]
    free_deleted_records: Option<bool>,
}

impl Resolver<'_> {
    /// `limits` under a phase-1 timeout of `phase1`: `max_ops_per_txn` at most
    /// [`LimitsConfig::max_ops_for_phase1`] — the default lowered to it, a value the file sets
    /// above it refused with both numbers.
    pub(super) fn limits_for_phase1(
        &self,
        mut limits: LimitsConfig,
        raw: &RawLimits,
        phase1: std::time::Duration,
    ) -> Res<LimitsConfig> {
        let most = LimitsConfig::max_ops_for_phase1(phase1);
        if limits.max_ops_per_txn <= most {
            return Ok(limits);
        }
        if raw.max_ops_per_txn.is_none() {
            limits.max_ops_per_txn = most;
            return Ok(limits);
        }
        Err(self.invalid(
            "limits.max_ops_per_txn",
            format!(
                "{} operations may hold an executor thread about {} ms ({} µs each), more than a tenth of the \
                 phase-1 timeout ({}); set at most {most}, or a longer timeouts.phase1_timeout",
                limits.max_ops_per_txn,
                limits.max_ops_per_txn * LimitsConfig::EXECUTOR_BUDGET_PER_OP.as_micros() as u64 / 1000,
                LimitsConfig::EXECUTOR_BUDGET_PER_OP.as_micros(),
                humantime::format_duration(phase1)
            ),
        ))
    }

    /// Parses and checks the `limits` section: each value set is at least 1 and at most its
    /// ceiling ([`LimitsConfig::MAX_OPS_PER_TXN_CEILING`], …); the byte limits take sizes
    /// (`4MiB`), the operation count a plain integer.
    pub(super) fn limits(&self, raw: &RawLimits) -> Res<LimitsConfig> {
        let d = LimitsConfig::default();
        Ok(LimitsConfig {
            max_ops_per_txn: self.limit(
                "max_ops_per_txn",
                &raw.max_ops_per_txn,
                d.max_ops_per_txn,
                LimitsConfig::MAX_OPS_PER_TXN_CEILING,
                false,
            )?,
            max_bytes_per_txn: self.limit(
                "max_bytes_per_txn",
                &raw.max_bytes_per_txn,
                d.max_bytes_per_txn,
                LimitsConfig::MAX_BYTES_PER_TXN_CEILING,
                true,
            )?,
            max_jsonl_line_bytes: self.limit(
                "max_jsonl_line_bytes",
                &raw.max_jsonl_line_bytes,
                d.max_jsonl_line_bytes,
                LimitsConfig::MAX_JSONL_LINE_BYTES_CEILING,
                true,
            )?,
            max_pending_votes: self.limit(
                "max_pending_votes",
                &raw.max_pending_votes,
                d.max_pending_votes,
                LimitsConfig::MAX_PENDING_VOTES_CEILING,
                false,
            )?,
            max_accepted_redo: self.limit(
                "max_accepted_redo",
                &raw.max_accepted_redo,
                d.max_accepted_redo,
                LimitsConfig::MAX_ACCEPTED_REDO_CEILING,
                false,
            )?,
            max_background_retries: self.limit(
                "max_background_retries",
                &raw.max_background_retries,
                d.max_background_retries,
                LimitsConfig::MAX_BACKGROUND_RETRIES_CEILING,
                false,
            )?,
            max_bulk_percent: self.limit("max_bulk_percent", &raw.max_bulk_percent, d.max_bulk_percent, 100, false)?,
            free_deleted_records: raw.free_deleted_records.unwrap_or(d.free_deleted_records),
        })
    }

    /// One limit at `limits.{key}`: `default` if unset, else a count (or, with `size`, a byte
    /// size) from 1 to `ceiling`.
    fn limit(&self, key: &str, raw: &Option<Text>, default: u64, ceiling: u64, size: bool) -> Res<u64> {
        let Some(text) = raw else { return Ok(default) };
        let field = || format!("limits.{key}");
        let v = if size {
            self.at(field, parse_size(&text.0))?
        } else {
            let t = text.0.trim();
            t.parse::<u64>().map_err(|_| self.invalid(field(), format!("invalid count `{t}`: expected an integer")))?
        };
        if v == 0 {
            return Err(self.invalid(field(), "must be at least 1"));
        }
        if v > ceiling {
            return Err(self.invalid(field(), format!("{v} is more than {ceiling}, the largest allowed")));
        }
        Ok(v)
    }
}
